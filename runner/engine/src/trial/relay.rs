//! The runner's own relays inside a trial container (the LLM bridge's and the egress
//! proxy's): the static `bridge-relay` from a read-only bind mount, started detached as root,
//! waited for, and stopped by the pid the runner remembers.

use std::time::Duration;

use tasks::{ExecRequest, Sandbox, shell_quote};

/// How long a relay may take to listen once started.
pub(super) const RELAY_WAIT_MS: u64 = 5_000;

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
) -> Result<u32, String> {
    let serve = format!(
        "{} >{log} 2>&1 </dev/null & echo $! > {pid_file}; echo $!",
        quote(serve)
    );
    let started = sandbox
        .exec(ExecRequest::runner_own(serve))
        .await
        .map_err(|e| format!("starting the relay: {e}"))?;
    let pid = started.stdout.trim().parse::<u32>().ok();
    let Some(pid) = pid.filter(|_| started.success()) else {
        return Err(format!(
            "starting the relay failed: {}",
            started.stderr.trim()
        ));
    };
    let waited = sandbox
        .exec(ExecRequest::runner_own(format!(
            "{wait} && kill -0 {pid} 2>/dev/null || {{ cat {log} >&2; exit 1; }}",
            wait = quote(wait)
        )))
        .await
        .map_err(|e| format!("waiting for the relay: {e}"))?;
    if !waited.success() {
        return Err(format!(
            "the relay did not listen within {RELAY_WAIT_MS} ms: {}",
            waited.stderr.trim()
        ));
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
