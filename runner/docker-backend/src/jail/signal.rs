//! Whose doing a verification that ended with no result was, when the jail or the trial's
//! container died under it.
//!
//! The jail shares the trial's PID namespace (it must, to join the trial's other namespaces),
//! so every process the agent left running can see its helper and, being root with Docker's
//! default `CAP_KILL`, signal it; the agent can also end its own container (`kill 1`). Nothing
//! can stop either; what matters is the record. Calling them infrastructure errors would let
//! an agent that expects to fail turn its 0 into a retried, then missing, trial. So both are
//! recorded as killed from inside the trial, the agent's failure: a helper that died of a
//! signal in a jail that hit no memory limit (the runner's own kill at the backstop never
//! reaches here), and a trial container that stopped before its verification ended without
//! being OOM-killed (the runner stops it only afterwards). A memory limit stays the
//! infrastructure's.

use crate::connect::DockerClient;
use crate::error::DockerError;

/// Why the jail `jail`'s helper, which exited with `exit`, counts as killed from inside the
/// trial container `trial`; `None` when it does not (it exited, the jail ran out of memory,
/// or the trial's container hit its memory limit).
pub(crate) async fn killed_from_inside(
    client: &DockerClient,
    jail: &str,
    trial: &str,
    exit: i64,
) -> Result<Option<String>, DockerError> {
    let Some(signal) = signal_of(exit) else {
        return Ok(None);
    };
    if let Some((_, true)) = stopped(client, jail).await? {
        return Ok(None);
    }
    Ok(match stopped(client, trial).await? {
        None => Some(format!(
            "the helper running the tests was killed by {signal} (exit {exit}) while they ran; \
             the trial's container still runs and the jail hit no memory limit, so the signal \
             came from a process in the trial's PID namespace: something the agent left running \
             (or the tests themselves)"
        )),
        // The trial's PID 1 ended, and the kernel killed its namespace, the helper with it.
        Some((trial_exit, oom)) => stopped_from_inside(trial_exit, oom),
    })
}

/// The exit code of the container `id` and whether it was OOM-killed, once it has stopped;
/// `None` while it runs.
pub(crate) async fn stopped(
    client: &DockerClient,
    id: &str,
) -> Result<Option<(i64, bool)>, DockerError> {
    let state = client
        .api()
        .inspect_container(id, None)
        .await
        .map_err(|e| DockerError::api(format!("inspecting {id}"), e))?
        .state
        .unwrap_or_default();
    Ok((!state.running.unwrap_or(false)).then(|| {
        (
            state.exit_code.unwrap_or(-1),
            state.oom_killed.unwrap_or(false),
        )
    }))
}

/// Why a trial container that stopped before its verification ended (its PID 1 exited with
/// `exit`) counts as stopped from inside, by the agent: the runner stops it only after
/// verification. `None` when its memory limit killed it, which stays the infrastructure's
/// to report.
pub(crate) fn stopped_from_inside(exit: i64, oom_killed: bool) -> Option<String> {
    (!oom_killed).then(|| {
        format!(
            "the trial's container stopped before its verification ended (its PID 1 exited \
             with {exit}, no memory limit was hit, and the runner stops it only after \
             verification): a process inside it, the agent or what it left running, ended it"
        )
    })
}

/// The signal an engine exit code reports (128 + its number), by name where it has a
/// common one; `None` for an exit of the helper's own (it uses 0, 2, 3 and 64).
fn signal_of(exit: i64) -> Option<String> {
    let number = exit.checked_sub(128).filter(|n| (1..=64).contains(n))?;
    Some(match number {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signal_exits_name_a_signal() {
        assert_eq!(signal_of(137).as_deref(), Some("SIGKILL"));
        assert_eq!(signal_of(143).as_deref(), Some("SIGTERM"));
        assert_eq!(signal_of(138).as_deref(), Some("signal 10"));
        for own in [0, 1, 2, 3, 64, 128, 193, -1] {
            assert_eq!(signal_of(own), None, "{own}");
        }
    }
}
