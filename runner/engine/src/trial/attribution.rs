//! Whose failure it was: after the runner's own work in a trial failed with an
//! infrastructure error, the environment is asked whether the state left inside it caused it.
//!
//! The rule (issue 29): an error is the infrastructure's only when it lies outside the agent's
//! reach (the engine, the host, the registry, the runner). Once the agent has had the
//! container (its install runs as root there), it can stop the container's PID 1, delete or
//! `chmod 000` the shell every runner command runs through, or fill the disk; each makes a
//! later command of the runner fail (a network switch, a step's reset, an upload, a relay
//! start), and each such failure would be an infrastructure error, retried and then left as
//! missing data: a re-roll an agent that expects a 0 can ask for. So when a failure of the
//! runner's plumbing ends such a trial, three questions are asked, in order, and the first
//! that finds the agent's doing replaces the error (the old one stays in the message):
//!
//! 1. Did the main container stop without its memory limit killing it? Only something inside
//!    stops it before the runner's teardown ([`ExceptionType::BrokenEnvironmentError`]). An
//!    OOM kill stays the infrastructure's, as everywhere else.
//! 2. Is its writable layer at its storage limit? ([`ExceptionType::StorageLimitExceededError`];
//!    a host disk that filled below the trial's limit stays the infrastructure's.)
//! 3. Does a trivial command of the runner's (`bash -c` as root, printing a nonce) still run?
//!    If the engine runs it and it does not answer, or the engine refuses it for the
//!    container's own files (no `bash`, no account for root), the container is not usable
//!    ([`ExceptionType::BrokenEnvironmentError`]).
//!
//! An engine that does not answer a question keeps the error as it was: nothing is blamed on
//! the agent without evidence.

use std::time::Duration;

use tasks::records::{ExceptionInfo, TrialResult};
use tasks::{Blame, ExceptionType, ExecRequest, Sandbox};

use super::Trial;
use crate::backend::{Backend, Environment, ServiceState};

/// How long the questions may take together; past it the error stays as it was.
pub(super) const DIAGNOSIS_TIMEOUT: Duration = Duration::from_secs(60);
/// The shell probe's own deadline.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);
/// A writable layer within this fraction of its limit counts as full: a quota's
/// `no space left on device` comes before the layer's measured size reaches the limit exactly.
const FULL_MARGIN_DIVISOR: u64 = 64;

/// True for the exception types a trial's own state can cause once the agent had the
/// container: the sandbox and verifier plumbing, a healthcheck, the relay. Not the image, the
/// start, the host's disk watermark, interruptions, pauses, the watchdog or a runner bug,
/// which nothing inside the container reaches.
pub(super) fn may_be_the_agents(kind: &ExceptionType) -> bool {
    use ExceptionType::*;
    kind.blame() == Blame::Infrastructure
        && matches!(
            kind,
            EnvironmentError
                | VerifierSandboxError
                | AddTestsDirError
                | DownloadVerifierDirError
                | HealthcheckError
                | LlmBridgeError
                | Other(_)
        )
}

/// The agent's failure behind an infrastructure error, if the environment shows one (see
/// the module docs); `None` keeps the error as it was.
pub(super) async fn diagnose<E: Environment>(
    environment: &E,
    storage_limit_mb: Option<u64>,
) -> Option<(ExceptionType, String)> {
    match environment.main_state().await {
        Ok(Some(ServiceState::Stopped {
            exit_code,
            oom_killed: false,
        })) => {
            return Some((
                ExceptionType::BrokenEnvironmentError,
                format!(
                    "the trial's container stopped before the runner was done with it (its PID 1 \
                     exited with {exit_code}, no memory limit was hit, and the runner stops it only \
                     at teardown): a process inside it, the agent or what it left running, ended it"
                ),
            ));
        }
        Ok(Some(ServiceState::Running)) => {}
        // OOM-killed, gone, unknown, or an engine that does not answer: not the agent's.
        _ => return None,
    }
    let sandbox = environment.main();
    if let Some(limit_mb) = storage_limit_mb
        && let Ok(Some(used)) = sandbox.disk_usage().await
        && is_full(used, limit_mb)
    {
        return Some((
            ExceptionType::StorageLimitExceededError,
            format!(
                "the environment's writable layer holds {} MB, at its storage limit of {limit_mb} MB",
                used >> 20
            ),
        ));
    }
    shell_broken(sandbox).await.map(|why| {
        (
            ExceptionType::BrokenEnvironmentError,
            format!(
                "the runner's own commands cannot run in the container any more: its shell \
                 or the account they run as is broken ({why}); only a process inside the \
                 container (the agent, or what it left running) changes them after the start"
            ),
        )
    })
}

/// True when `used` bytes fill a limit of `limit_mb` (within [`FULL_MARGIN_DIVISOR`]).
fn is_full(used: u64, limit_mb: u64) -> bool {
    let limit = limit_mb.saturating_mul(1 << 20);
    used >= limit - limit / FULL_MARGIN_DIVISOR
}

/// Why `bash -c` no longer runs a trivial command in `sandbox`, or `None` when it does or
/// when the engine itself failed (a sandbox error that does not come from the container).
async fn shell_broken<S: Sandbox>(sandbox: &S) -> Option<String> {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let probe = ExecRequest::runner_own(format!("printf %s {nonce}")).timeout(PROBE_TIMEOUT);
    match sandbox.exec(probe).await {
        Ok(out) if out.success() && out.stdout.trim() == nonce => None,
        Ok(out) if out.timed_out => Some(format!(
            "a `printf` through it did not end in {} s",
            PROBE_TIMEOUT.as_secs()
        )),
        Ok(out) => Some(format!(
            "a `printf` through it exited {} and printed {:?}: {}",
            out.exit_code
                .map_or("without a code".into(), |c| c.to_string()),
            tasks::exception::first_line(&out.stdout),
            tasks::exception::first_line(out.stderr.trim())
        )),
        Err(e) if is_containers_own(&e.message) => Some(format!("the engine said: {e}")),
        Err(_) => None,
    }
}

/// True for an exec refusal that comes from the container's own files (the runtime could not
/// start the program, the cwd, or find the user the exec names), not from the engine. (The
/// Docker engine reports a missing or `chmod 000` shell inside the exec's output with exit 126
/// instead, which the probe reads as a failed command.)
fn is_containers_own(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "oci runtime exec failed",
        "unable to find user",
        "no matching entries in passwd",
    ]
    .iter()
    .any(|sign| message.contains(sign))
}

/// Replaces the trial's exception with `kind` and `why`, keeping the error it replaces in the
/// message and the traceback, and rewrites `exception.txt`; the last step's record of the same
/// error (a multi-step trial's) says the same.
pub(super) fn replace_exception(
    result: &mut TrialResult,
    trial_dir: &std::path::Path,
    kind: ExceptionType,
    why: &str,
) {
    let Some(info) = &mut result.exception_info else {
        return;
    };
    let old = info.clone();
    *info = replaced(&old, kind.clone(), why);
    let _ = tasks::atomic::write_atomic(
        &trial_dir.join("exception.txt"),
        info.exception_traceback.as_bytes(),
    );
    let last_step = result.step_results.iter_mut().flatten().next_back();
    if let Some(step_info) = last_step.and_then(|s| s.exception_info.as_mut())
        && step_info.exception_type == old.exception_type
        && step_info.exception_message == old.exception_message
    {
        *step_info = replaced(&old, kind, why);
    }
}

fn replaced(old: &ExceptionInfo, kind: ExceptionType, why: &str) -> ExceptionInfo {
    let message = format!(
        "{why}; the runner's work failed because of it: {}",
        old.headline()
    );
    let traceback = format!(
        "{kind}: {message}\n\ncaused: {}: {}\n",
        old.exception_type, old.exception_message
    );
    ExceptionInfo {
        exception_type: kind,
        exception_message: message,
        exception_traceback: traceback,
        occurred_at: old.occurred_at,
        policy: None,
        policy_override: None,
    }
}

impl<B: Backend> Trial<B> {
    /// When the trial ended with an infrastructure error of the runner's plumbing after the
    /// agent had the container, asks the environment whether the state left inside caused it,
    /// and if so records the agent's failure instead (see this module). Skipped when the
    /// run is interrupted; bounded by [`DIAGNOSIS_TIMEOUT`].
    pub(super) async fn attribute(&mut self) {
        let questioned = self
            .result
            .exception_info
            .as_ref()
            .is_some_and(|info| may_be_the_agents(&info.exception_type));
        let Some(environment) = self.environment.as_ref().filter(|_| questioned) else {
            return;
        };
        if !self.agent_had_container {
            return;
        }
        let diagnosis = tokio::select! {
            biased;
            _ = self.ctx.cancel.cancelled() => None,
            found = tokio::time::timeout(
                DIAGNOSIS_TIMEOUT,
                diagnose(environment, self.limits.storage_mb),
            ) => found.ok().flatten(),
        };
        if let Some((kind, why)) = diagnosis {
            self.log.line(&format!(
                "the failure was the agent's: {kind}: {why}; never retried"
            ));
            replace_exception(&mut self.result, &self.dir, kind, &why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plumbing_errors_are_questioned() {
        for kind in [
            ExceptionType::EnvironmentError,
            ExceptionType::VerifierSandboxError,
            ExceptionType::AddTestsDirError,
            ExceptionType::LlmBridgeError,
        ] {
            assert!(may_be_the_agents(&kind), "{kind}");
        }
        for kind in [
            ExceptionType::EnvironmentStartError,
            ExceptionType::SandboxBuildFailedError,
            ExceptionType::CancelledError,
            ExceptionType::RunnerError,
            ExceptionType::BackendTimeoutError,
            ExceptionType::RunnerPausedError,
            ExceptionType::DiskSpaceError,
            ExceptionType::AgentTimeoutError,
        ] {
            assert!(!may_be_the_agents(&kind), "{kind}");
        }
    }

    #[test]
    fn a_layer_near_its_limit_is_full() {
        assert!(is_full(100 << 20, 100));
        assert!(is_full((100 << 20) - (1 << 20), 100));
        assert!(!is_full(90 << 20, 100));
        assert!(!is_full(0, 0) || is_full(0, 0), "no panic on a zero limit");
    }

    #[test]
    fn exec_refusals_from_the_containers_files_are_told_from_the_engines() {
        assert!(is_containers_own(
            "OCI runtime exec failed: exec failed: exec: \"bash\": executable file not found in $PATH"
        ));
        assert!(is_containers_own(
            "unable to find user root: no matching entries in passwd file"
        ));
        assert!(!is_containers_own(
            "error trying to connect: connection refused"
        ));
        assert!(!is_containers_own("Container abc is not running"));
    }
}
