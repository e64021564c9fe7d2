//! The verification phase, delegated to the `verifiers` crate.

use std::path::Path;
use std::time::Instant;

use tasks::records::VerifierResult;
use tasks::{Sandbox, Task};

/// Runs the task's tests; on failure returns Harbor's exception type and a message.
pub async fn verify<S: Sandbox>(
    _sandbox: &S,
    task: &Task,
    _trial_dir: &Path,
    _deadline: Instant,
) -> Result<VerifierResult, (&'static str, String)> {
    Err(("VerifierError", format!("task {}: the verifier is not wired in yet", task.name)))
}
