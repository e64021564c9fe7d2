//! The agent's server inside the container: started detached (its own session, so the exec that
//! starts it can end and exec timeouts cannot reach it), watched through a pid file, its output
//! kept in a log file that is always copied to `agent/server.log`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use tasks::{ExecRequest, Sandbox};

use super::transport::{InContainerHttp, TransportError};
use super::trial_files::run_root_step;
use crate::agent::{AgentError, AgentErrorKind};

/// Where one agent's server keeps its log and pid inside the container.
#[derive(Debug, Clone)]
pub struct ServerPaths {
    /// The state directory.
    pub dir: String,
}

impl ServerPaths {
    /// Paths for agent `name`.
    pub fn new(name: &str) -> Self {
        Self {
            dir: format!("/tmp/runner-agent-{name}"),
        }
    }

    /// The server's combined stdout/stderr.
    pub fn log(&self) -> String {
        format!("{}/server.log", self.dir)
    }

    /// The server's pid.
    pub fn pid(&self) -> String {
        format!("{}/server.pid", self.dir)
    }
}

/// How to start the server.
#[derive(Debug, Clone)]
pub struct ServerStart<'a> {
    /// The shell command (placeholders already replaced).
    pub command: &'a str,
    /// Its working directory.
    pub cwd: &'a str,
    /// The user it runs as.
    pub user: Option<&'a str>,
    /// Its environment.
    pub env: &'a BTreeMap<String, String>,
}

/// Starts the server in the background and records its pid.
pub async fn start<S: Sandbox>(
    sandbox: &S,
    paths: &ServerPaths,
    start: &ServerStart<'_>,
) -> Result<(), AgentError> {
    // The state dir is world-writable so a non-root server can write its log there.
    let prepare = format!(
        "mkdir -p '{0}' && chmod 1777 '{0}' && rm -f '{1}' '{2}'",
        paths.dir,
        paths.log(),
        paths.pid()
    );
    run_root_step(
        sandbox,
        prepare,
        Duration::from_secs(30),
        AgentErrorKind::Server,
        &format!("preparing {} for the agent server", paths.dir),
    )
    .await?;
    let script = r#"cd "$RUNNER_SERVER_CWD" || exit 1
if command -v setsid >/dev/null 2>&1; then
  setsid nohup bash -c "$RUNNER_SERVER_COMMAND" >>"$RUNNER_SERVER_LOG" 2>&1 </dev/null &
else
  nohup bash -c "$RUNNER_SERVER_COMMAND" >>"$RUNNER_SERVER_LOG" 2>&1 </dev/null &
fi
echo $! >"$RUNNER_SERVER_PID"
"#;
    let mut request = ExecRequest::new(script)
        .maybe_user(start.user)
        .envs(start.env)
        .timeout(Duration::from_secs(30));
    request
        .env
        .insert("RUNNER_SERVER_CWD".into(), start.cwd.into());
    request
        .env
        .insert("RUNNER_SERVER_COMMAND".into(), start.command.into());
    request.env.insert("RUNNER_SERVER_LOG".into(), paths.log());
    request.env.insert("RUNNER_SERVER_PID".into(), paths.pid());
    let out = sandbox.exec(request).await?;
    if !out.success() {
        return Err(AgentError::new(
            AgentErrorKind::Server,
            format!(
                "starting the agent server (`{}`) failed: {}{}",
                start.command,
                out.stdout.trim(),
                out.stderr.trim()
            ),
        ));
    }
    Ok(())
}

/// True while the server process is alive. A zombie counts as dead: containers whose PID 1
/// does not reap orphans keep a crashed server's pid around, and `kill -0` still succeeds on it.
pub async fn is_alive<S: Sandbox>(sandbox: &S, paths: &ServerPaths) -> Result<bool, AgentError> {
    let cmd = format!(
        r#"pid=$(cat '{}' 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || exit 1
if [ -r "/proc/$pid/stat" ]; then read -r stat < "/proc/$pid/stat"; s=${{stat##*) }}; [ "${{s%% *}}" != Z ]; fi"#,
        paths.pid()
    );
    let out = sandbox
        .exec(ExecRequest::root(cmd).timeout(Duration::from_secs(30)))
        .await?;
    Ok(out.success())
}

/// Stops the server (its whole session) if it runs.
pub async fn stop<S: Sandbox>(sandbox: &S, paths: &ServerPaths) -> Result<(), AgentError> {
    let cmd = format!(
        "pid=$(cat '{}' 2>/dev/null) || exit 0; kill -TERM -- -\"$pid\" 2>/dev/null || kill -TERM \"$pid\" 2>/dev/null; \
         sleep 1; kill -KILL -- -\"$pid\" 2>/dev/null; true",
        paths.pid()
    );
    sandbox
        .exec(ExecRequest::root(cmd).timeout(Duration::from_secs(30)))
        .await?;
    Ok(())
}

/// Copies the server log (its last 8 MiB) to `host_path`. Best effort: a failure is noted in the
/// file itself, because the log matters most when something already went wrong.
pub async fn save_log<S: Sandbox>(sandbox: &S, paths: &ServerPaths, host_path: &Path) {
    let cmd = format!("tail -c 8388608 '{}' 2>/dev/null || true", paths.log());
    let text = match sandbox
        .exec(ExecRequest::root(cmd).timeout(Duration::from_secs(60)))
        .await
    {
        Ok(out) => out.stdout,
        Err(e) => format!(
            "[runner] could not read the server log {}: {e}\n",
            paths.log()
        ),
    };
    if let Some(dir) = host_path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = tasks::atomic::write_atomic(host_path, text.as_bytes());
}

/// Polls the health endpoint until it answers 2xx, the server dies, or `deadline` passes.
pub async fn wait_healthy<S: Sandbox>(
    sandbox: &S,
    http: &InContainerHttp,
    paths: &ServerPaths,
    health_path: &str,
    deadline: Instant,
) -> Result<Duration, AgentError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(100);
    let mut last = String::from("no answer yet");
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(AgentError::new(
                AgentErrorKind::Server,
                format!(
                    "the agent server never became healthy: GET {health_path} on port {} gave no 2xx answer within the \
                     agent setup deadline ({:.0} s; last: {last}); see agent/server.log",
                    http.port,
                    started.elapsed().as_secs_f64()
                ),
            ));
        }
        let limit = remaining
            .min(Duration::from_secs(5))
            .max(Duration::from_millis(500));
        match http.request(sandbox, "GET", health_path, None, limit).await {
            Ok(resp) if resp.is_success() => return Ok(started.elapsed()),
            Ok(resp) => last = format!("HTTP {}", resp.status),
            Err(TransportError::Sandbox(e)) => return Err(e.into()),
            Err(e) => last = e.to_string(),
        }
        if !is_alive(sandbox, paths).await? {
            return Err(AgentError::new(
                AgentErrorKind::Server,
                format!(
                    "the agent server exited before it became healthy (last: {last}); see agent/server.log"
                ),
            ));
        }
        tokio::time::sleep(delay.min(deadline.saturating_duration_since(Instant::now()))).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}
