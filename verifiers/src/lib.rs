//! The verifier contract: run the task tests, read rewards safely, parse named checks.
