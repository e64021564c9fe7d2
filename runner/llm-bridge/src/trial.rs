//! One trial's bridge: its shared state (read by the server's handlers) and the handle the
//! runner holds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::bridge::{CONTAINER_BRIDGE_DIR, JobState, SOCKET_FILE_NAME};
use crate::config::Budget;
use crate::error::{BridgeError, io_error};
use crate::policy::{ModelPolicy, Spend};
use crate::record::TrialRecorder;
use crate::relay::{
    RELAY_FILE_NAME, relay_end_turn_command, relay_serve_command, relay_wait_command,
};
use crate::summary::TrialUsage;
use crate::token::TrialToken;

/// One trial's state, shared by its server's handlers.
#[derive(Debug)]
pub(crate) struct TrialState {
    pub job: Arc<JobState>,
    pub name: String,
    pub token: TrialToken,
    /// False once the trial closes: the token is revoked from then on.
    pub open: AtomicBool,
    /// True while the agent phase runs (see [`TrialBridge::pause`]): calls are served only then.
    pub serving: AtomicBool,
    pub policy: ModelPolicy,
    pub budget: Budget,
    pub usage: Mutex<TrialUsage>,
    /// What calls in flight hold of the trial's budget (see `crate::ledger`).
    pub held: Mutex<Spend>,
    pub recorder: TrialRecorder,
    pub next_call: AtomicU64,
    /// Slots for calls in flight (see `BridgeConfig::max_concurrent_calls_per_trial`).
    pub call_slots: Arc<tokio::sync::Semaphore>,
}

impl TrialState {
    /// True when one of the presented credentials is this trial's token (live or not).
    pub fn presents_token<'a>(&self, mut presented: impl Iterator<Item = &'a str>) -> bool {
        presented.any(|p| self.token.matches(p))
    }

    /// True when the trial serves calls now: open and in its agent phase.
    pub fn serving(&self) -> bool {
        self.open.load(Ordering::Acquire) && self.serving.load(Ordering::Acquire)
    }
}

/// One trial's bridge. Give the agent [`TrialBridge::agent_env`], bind-mount
/// [`TrialBridge::socket_dir`] at [`CONTAINER_BRIDGE_DIR`], start the relay with
/// [`TrialBridge::relay_serve_command`], and call [`TrialBridge::close`] when the agent is done.
#[derive(Debug)]
pub struct TrialBridge {
    pub(crate) state: Arc<TrialState>,
    pub(crate) socket_dir: PathBuf,
    pub(crate) socket_path: PathBuf,
    pub(crate) relay_port: u16,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) server: Option<JoinHandle<()>>,
}

impl TrialBridge {
    /// The trial's name.
    pub fn trial_name(&self) -> &str {
        &self.state.name
    }

    /// The per-trial token (`runner-trial-…`) the agent uses as its API key.
    pub fn token(&self) -> &str {
        self.state.token.as_str()
    }

    /// The host directory to bind-mount at [`CONTAINER_BRIDGE_DIR`]: it holds the socket and
    /// the relay executable, nothing else.
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// The socket itself, for host-side clients (tests, the benchmark).
    pub fn socket_path(&self) -> &Path {
        &self.socket_path
    }

    /// The relay port inside the container.
    pub fn relay_port(&self) -> u16 {
        self.relay_port
    }

    /// The environment for the agent: base URLs at the in-container relay and the token as
    /// both API keys. These are the only LLM settings the agent needs; no real key is among
    /// them (the token is not key-shaped, though the names look like credentials, so the
    /// secret boundary must let exactly these values through).
    pub fn agent_env(&self) -> Vec<(String, String)> {
        let base = format!("http://127.0.0.1:{}", self.relay_port);
        let token = self.token().to_owned();
        vec![
            ("OPENAI_BASE_URL".into(), format!("{base}/v1")),
            ("OPENAI_API_KEY".into(), token.clone()),
            ("ANTHROPIC_BASE_URL".into(), base),
            ("ANTHROPIC_API_KEY".into(), token),
        ]
    }

    /// The command (argv) that starts the relay in the container; run it detached, as root.
    pub fn relay_serve_command(&self) -> Vec<String> {
        relay_serve_command(
            &format!("{CONTAINER_BRIDGE_DIR}/{RELAY_FILE_NAME}"),
            &format!("{CONTAINER_BRIDGE_DIR}/{SOCKET_FILE_NAME}"),
            self.relay_port,
        )
    }

    /// The command (argv) that exits 0 once the relay listens, or 1 after `timeout_ms`.
    pub fn relay_wait_command(&self, timeout_ms: u64) -> Vec<String> {
        relay_wait_command(
            &format!("{CONTAINER_BRIDGE_DIR}/{RELAY_FILE_NAME}"),
            self.relay_port,
            timeout_ms,
        )
    }

    /// The trial's usage so far.
    pub fn usage(&self) -> TrialUsage {
        self.state
            .usage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The trial's record directory, `<trial>/llm/`.
    pub fn record_dir(&self) -> &Path {
        self.state.recorder.dir()
    }

    /// Stops serving calls until [`TrialBridge::resume`]: from now on every call (and the
    /// model list) is refused with 401 before anything is forwarded; calls already forwarded
    /// go on. The runner pauses the moment the agent's command exits, so a process the agent
    /// left behind cannot reach the provider after the agent phase; the agent's command can
    /// also end its own turn in-band, before it exits (see
    /// [`TrialBridge::end_turn_command`]). Idempotent.
    pub fn pause(&self) {
        self.state.serving.store(false, Ordering::Release);
    }

    /// Serves calls again (the next agent phase of a multi-step task). A closed trial stays
    /// closed.
    pub fn resume(&self) {
        self.state.serving.store(true, Ordering::Release);
    }

    /// The shell command (for `sh`) that pauses this trial from inside the container through
    /// the relay and returns once the bridge has paused: run it right after the agent's command
    /// exits, in the same shell, so no process can see that command gone while the token still
    /// works. It holds the trial's token (as the agent's env does) and never fails the shell.
    pub fn end_turn_command(&self) -> String {
        let argv = relay_end_turn_command(
            &format!("{CONTAINER_BRIDGE_DIR}/{RELAY_FILE_NAME}"),
            self.relay_port,
            self.token(),
        );
        let quoted: Vec<String> = argv.iter().map(|a| tasks::shell_quote(a)).collect();
        format!("{} >/dev/null 2>&1 || true", quoted.join(" "))
    }

    /// Ends the trial's bridge: revokes the token at once, lets running calls finish for the
    /// configured grace, cuts off the rest (recorded as `aborted`), removes the socket
    /// directory, syncs `calls.jsonl`, writes `usage.json` atomically and returns the usage.
    pub async fn close(mut self) -> Result<TrialUsage, BridgeError> {
        self.stop();
        if let Some(server) = self.server.take() {
            // The server cuts connections off after the grace itself; this only waits.
            let _ = server.await;
        }
        let _ = std::fs::remove_dir_all(&self.socket_dir);
        let recorder = &self.state.recorder;
        recorder.sync().map_err(io_error(format!(
            "cannot sync {}/calls.jsonl",
            recorder.dir().display()
        )))?;
        let usage = self.usage();
        tracing::info!(
            trial = %self.state.name,
            calls = usage.n_calls,
            refused = usage.n_refused_calls,
            input_tokens = usage.n_input_tokens,
            output_tokens = usage.n_output_tokens,
            cost_usd = usage.cost_usd,
            "llm bridge closed the trial"
        );
        let path = recorder.dir().join("usage.json");
        tasks::atomic::write_json_atomic(&path, &usage)
            .map_err(io_error(format!("cannot write {}", path.display())))?;
        Ok(usage)
    }

    fn stop(&self) {
        self.state.open.store(false, Ordering::Release);
        let _ = self.shutdown.send(true);
    }
}

impl Drop for TrialBridge {
    /// A trial bridge dropped without `close` (an early return, a panic) still revokes its
    /// token and stops serving; its records are what was written until then.
    fn drop(&mut self) {
        self.stop();
        if let Some(server) = self.server.take() {
            server.abort();
        }
        let _ = std::fs::remove_dir_all(&self.socket_dir);
    }
}
