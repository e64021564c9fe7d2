//! End-to-end tests against a real Docker engine.
