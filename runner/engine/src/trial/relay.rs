//! The runner's own relays inside a trial container (the LLM bridge's and the egress
//! proxy's): the static `bridge-relay` from a read-only bind mount, started detached as root,
//! waited for, and stopped by the pid the runner remembers.

use std::time::Duration;

use tasks::{ExecRequest, Sandbox, SandboxError, shell_quote};

/// How long a relay may take to listen once started.
pub(super) const RELAY_WAIT_MS: u64 = 5_000;

/// Why a relay did not start; the messages end in the sandbox's or the relay's own words.
#[derive(Debug, thiserror::Error)]
pub(super) enum RelayError {
    /// The command that starts the relay could not be run in the container.
    #[error("starting the relay: {0}")]
    Start(#[source] SandboxError),
    /// The start command ran but printed no pid or failed (its stderr).
    #[error("starting the relay failed: {0}")]
    StartFailed(String),
    /// The command that waits for the relay could not be run in the container.
    #[error("waiting for the relay: {0}")]
    Wait(#[source] SandboxError),
    /// The relay did not listen in time, or exited (the relay's log).
    #[error("the relay did not listen within {RELAY_WAIT_MS} ms: {0}")]
    NotListening(String),
}

fn quote(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Starts `serve` detached (its output in `log`, its pid in `pid_file`), waits with `wait`
/// until it listens and checks that the process listening is still the one started (a relay
/// that could not bind its port exits, even when something else answers there). Returns the
/// relay's pid; `Err` says what failed, with the relay's own complaint.
pub(super) async fn start_relay<S: Sandbox>(
    sandbox: &S,
    serve: &[String],
    wait: &[String],
    log: &str,
    pid_file: &str,
) -> Result<u32, RelayError> {
    let serve = format!(
        "{} >{log} 2>&1 </dev/null & echo $! > {pid_file}; echo $!",
        quote(serve)
    );
    let started = sandbox
        .exec(ExecRequest::runner_own(serve))
        .await
        .map_err(RelayError::Start)?;
    let pid = started.stdout.trim().parse::<u32>().ok();
    let Some(pid) = pid.filter(|_| started.success()) else {
        return Err(RelayError::StartFailed(started.stderr.trim().to_owned()));
    };
    let waited = sandbox
        .exec(ExecRequest::runner_own(format!(
            "{wait} && kill -0 {pid} 2>/dev/null || {{ cat {log} >&2; exit 1; }}",
            wait = quote(wait)
        )))
        .await
        .map_err(RelayError::Wait)?;
    if !waited.success() {
        return Err(RelayError::NotListening(waited.stderr.trim().to_owned()));
    }
    Ok(pid)
}

/// Stops the relay `pid` (its pid file removed): a TERM, up to 2 s for it to go, then a
/// KILL. False when the container could not be asked.
pub(super) async fn stop_relay<S: Sandbox>(sandbox: &S, pid: u32, pid_file: &str) -> bool {
    // A TERM is only a request: what runs next may list processes, so wait until the relay
    // is gone or a zombie, then KILL whatever still runs.
    let stop = format!(
        r#"p={pid}; rm -f {pid_file}
kill "$p" 2>/dev/null
running() {{ case "$(cat /proc/$p/status 2>/dev/null)" in ""|*"(zombie)"*) return 1;; esac; }}
i=0; while running && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
if running; then kill -9 "$p" 2>/dev/null; fi
true"#
    );
    let stopped = tokio::time::timeout(
        Duration::from_secs(10),
        sandbox.exec(ExecRequest::runner_own(stop)),
    )
    .await;
    matches!(stopped, Ok(Ok(_)))
}
