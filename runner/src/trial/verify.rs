//! The verification phase, delegated to the `verifiers` crate.

use std::path::Path;
use std::time::Instant;

use tasks::records::VerifierResult;
use tasks::{Sandbox, Task};

/// Runs the task's tests; on failure returns Harbor's exception type and a message.
pub async fn verify<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    trial_dir: &Path,
    deadline: Instant,
) -> Result<VerifierResult, (&'static str, String)> {
    verifiers::verify(sandbox, task, trial_dir, deadline)
        .await
        .map(|outcome| outcome.result)
        .map_err(|e| (e.exception_type(), e.to_string()))
}
