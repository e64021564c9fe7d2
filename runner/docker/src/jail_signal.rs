//! Whose doing a verifier jail's death by a signal was.
//!
//! The jail shares the trial's PID namespace (it must, to join the trial's other namespaces),
//! so every process the agent left running can see its helper and, being root with Docker's
//! default `CAP_KILL`, signal it. Nothing can stop that; what matters is the record. A helper
//! killed mid-verification left no result, and calling that an infrastructure error would let
//! an agent that expects to fail turn its 0 into a retried, then missing, trial. So a helper
//! that died of a signal while the trial's container still runs, in a jail that hit no memory
//! limit, and not by the runner's own kill (that path never reaches here), is recorded as
//! killed from inside the trial: the agent's failure. Everything else stays the
//! infrastructure's.

use super::{DockerClient, DockerError};

/// Why the jail `jail`'s helper, which exited with `exit`, counts as killed from inside the
/// trial container `trial`; `None` when it does not (it exited, the jail ran out of memory,
/// or the trial's container is gone too).
pub(crate) async fn killed_from_inside(
    client: &DockerClient,
    jail: &str,
    trial: &str,
    exit: i64,
) -> Result<Option<String>, DockerError> {
    let Some(signal) = signal_of(exit) else {
        return Ok(None);
    };
    let jail_state = client
        .api()
        .inspect_container(jail, None)
        .await
        .map_err(|e| DockerError::api(format!("inspecting the verifier jail {jail}"), e))?
        .state;
    if jail_state.and_then(|s| s.oom_killed).unwrap_or(false) {
        return Ok(None);
    }
    if !is_running(client, trial).await? {
        return Ok(None);
    }
    Ok(Some(format!(
        "the helper running the tests was killed by {signal} (exit {exit}) while they ran; the \
         trial's container still runs and the jail hit no memory limit, so the signal came \
         from a process in the trial's PID namespace: something the agent left running (or \
         the tests themselves)"
    )))
}

/// True when the container `id` is running.
pub(crate) async fn is_running(client: &DockerClient, id: &str) -> Result<bool, DockerError> {
    Ok(client
        .api()
        .inspect_container(id, None)
        .await
        .map_err(|e| DockerError::api(format!("inspecting {id}"), e))?
        .state
        .and_then(|s| s.running)
        .unwrap_or(false))
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
