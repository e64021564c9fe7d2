//! Commands inside a container: streamed output, exit code, and deadlines that really stop
//! the command. Docker has no API to kill an exec, so the deadline is enforced inside the
//! container by coreutils `timeout`, which signals the command's whole process group.

use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use engine::OutputSink;
use futures_util::StreamExt;
use tasks::{ExecOutput, ExecRequest};

use crate::connect::DockerClient;
use crate::error::DockerError;

/// Captured output beyond this many bytes per stream is dropped (the sink still sees it).
const CAPTURE_LIMIT: usize = 8 * 1024 * 1024;
/// Grace between the polite TERM and the KILL at a deadline.
const KILL_GRACE_SECS: u64 = 5;
/// Extra wait on the host past the in-container deadline before giving up on the stream.
const HOST_BACKSTOP: Duration = Duration::from_secs(KILL_GRACE_SECS + 10);

/// The shell a container's commands run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// `bash -c` under coreutils `timeout`: the main service (Harbor's images ship bash, and
    /// tasks rely on it).
    Bash,
    /// `sh -c`, under `timeout` when the image has one that takes `-k`: a compose sidecar,
    /// an arbitrary image (Harbor 0.26 runs sidecar commands with `sh` for the same reason:
    /// minimal images lack bash). Without `timeout` only the host's backstop bounds the wait.
    Posix,
}

/// The `sh` script that runs `$2` under `timeout -k <grace> $1` when the image's `timeout`
/// takes those options, else plainly.
const POSIX_WRAPPER: &str = "if command -v timeout >/dev/null 2>&1 && timeout -k 1 1 true 2>/dev/null; then exec timeout -k $0 \"$1\" sh -c \"$2\"; else exec sh -c \"$2\"; fi";

/// Runs `request` in `container` with `shell` and waits for it or its deadline.
pub async fn run(
    client: &DockerClient,
    container: &str,
    request: &ExecRequest,
    (default_workdir, shell): (Option<&str>, Shell),
    sink: &OutputSink,
) -> Result<ExecOutput, DockerError> {
    let started = Instant::now();
    let Some(cmd) = command_line(request, shell) else {
        return Ok(ExecOutput {
            exit_code: None,
            timed_out: true,
            ..ExecOutput::default()
        });
    };
    let env: Vec<String> = request
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let options = CreateExecOptions {
        cmd: Some(cmd),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        env: (!env.is_empty()).then_some(env),
        user: request.user.clone(),
        working_dir: request
            .cwd
            .clone()
            .or_else(|| default_workdir.map(str::to_owned)),
        ..Default::default()
    };
    let exec_id = client
        .api()
        .create_exec(container, options)
        .await
        .map_err(|e| DockerError::api(format!("creating exec in {container}"), e))?
        .id;
    let started_exec = client
        .api()
        .start_exec(&exec_id, None)
        .await
        .map_err(|e| DockerError::api(format!("starting exec in {container}"), e))?;
    let captured = capture(started_exec, container, request.timeout, sink).await?;
    let exit_code = if captured.backstop_hit {
        None
    } else {
        wait_exit_code(client, &exec_id).await?
    };
    let elapsed = started.elapsed();
    let timed_out = captured.backstop_hit
        || match (request.timeout, exit_code) {
            // 124: TERM at the deadline; 137: KILL after the grace.
            (Some(timeout), Some(124 | 137)) => elapsed + Duration::from_millis(50) >= timeout,
            _ => false,
        };
    Ok(ExecOutput {
        exit_code: if timed_out { None } else { exit_code },
        stdout: String::from_utf8_lossy(&captured.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&captured.stderr).into_owned(),
        timed_out,
        elapsed,
    })
}

/// The command line that runs `request` in `shell` under its deadline, or `None` when the
/// deadline is already spent: `timeout 0` would mean "no deadline", and a spent deadline must
/// not run at all.
fn command_line(request: &ExecRequest, shell: Shell) -> Option<Vec<String>> {
    if request
        .timeout
        .is_some_and(|t| t < Duration::from_millis(10))
    {
        return None;
    }
    let mut cmd: Vec<String> = Vec::new();
    match shell {
        Shell::Posix => {
            cmd.extend(["sh".into(), "-c".into(), POSIX_WRAPPER.into()]);
            cmd.push(KILL_GRACE_SECS.to_string());
            cmd.push(
                request
                    .timeout
                    .map_or("0".into(), |t| format!("{:.3}", t.as_secs_f64())),
            );
            cmd.push(request.command.clone());
        }
        Shell::Bash => {
            if let Some(timeout) = request.timeout {
                cmd.extend([
                    "timeout".into(),
                    "-k".into(),
                    KILL_GRACE_SECS.to_string(),
                    format!("{:.3}", timeout.as_secs_f64()),
                ]);
            }
            cmd.extend(["bash".into(), "-c".into(), request.command.clone()]);
        }
    }
    Some(cmd)
}

/// What an exec's attached stream gave: each stream's capture (up to [`CAPTURE_LIMIT`]), and
/// whether the host's backstop gave up on the stream first.
struct Captured {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    backstop_hit: bool,
}

/// Reads the exec's output into `sink` and the capture until it ends, or until the host's
/// backstop past `timeout`.
async fn capture(
    started_exec: StartExecResults,
    container: &str,
    timeout: Option<Duration>,
    sink: &OutputSink,
) -> Result<Captured, DockerError> {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut backstop_hit = false;
    if let StartExecResults::Attached { mut output, .. } = started_exec {
        let drain = async {
            while let Some(message) = output.next().await {
                let (stream, bytes, buffer) = match message {
                    Ok(LogOutput::StdOut { message }) => ("stdout", message, &mut stdout),
                    Ok(LogOutput::StdErr { message }) => ("stderr", message, &mut stderr),
                    Ok(LogOutput::Console { message }) => ("stdout", message, &mut stdout),
                    Ok(LogOutput::StdIn { .. }) => continue,
                    Err(e) => {
                        return Err(DockerError::api(
                            format!("reading exec output in {container}"),
                            e,
                        ));
                    }
                };
                sink(stream, &bytes);
                let room = CAPTURE_LIMIT.saturating_sub(buffer.len());
                buffer.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Ok(())
        };
        match timeout {
            Some(timeout) => match tokio::time::timeout(timeout + HOST_BACKSTOP, drain).await {
                Ok(result) => result?,
                Err(_) => backstop_hit = true,
            },
            None => drain.await?,
        }
    }
    Ok(Captured {
        stdout,
        stderr,
        backstop_hit,
    })
}

/// The exit code, once the engine reports the exec finished (it can lag the stream's end).
async fn wait_exit_code(client: &DockerClient, exec_id: &str) -> Result<Option<i64>, DockerError> {
    for attempt in 0..50u32 {
        let inspect = client
            .api()
            .inspect_exec(exec_id)
            .await
            .map_err(|e| DockerError::api("inspecting exec", e))?;
        if inspect.running != Some(true) {
            return Ok(inspect.exit_code);
        }
        tokio::time::sleep(Duration::from_millis(10 * u64::from(attempt.min(10) + 1))).await;
    }
    Ok(None)
}
