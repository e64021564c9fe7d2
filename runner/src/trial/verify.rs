//! The verification phase, delegated to the `verifiers` crate.

use std::path::Path;
use std::time::Instant;

use tasks::records::VerifierResult;
use tasks::{Sandbox, Task};

/// A failed verification: Harbor's exception type, a message, and what was learnt anyway
/// (the test exit code and named checks, without rewards).
pub struct VerifyFailure {
    /// Harbor's exception type.
    pub exception_type: &'static str,
    /// What happened.
    pub message: String,
    /// Partial result.
    pub partial: Option<VerifierResult>,
}

/// Runs the task's tests.
pub async fn verify<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    trial_dir: &Path,
    deadline: Instant,
) -> Result<VerifierResult, VerifyFailure> {
    verifiers::verify(sandbox, task, trial_dir, deadline)
        .await
        .map(|outcome| outcome.result)
        .map_err(|e| VerifyFailure {
            exception_type: e.exception_type(),
            message: e.to_string(),
            partial: e.partial,
        })
}
