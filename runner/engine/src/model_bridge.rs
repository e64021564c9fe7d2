//! The seam between the engine and an LLM bridge: what the engine asks of whatever serves a
//! trial's agent its models without handing it a provider key.
//!
//! The engine owns the trait; the implementation (runner/llm-bridge: an HTTP server per trial
//! on a unix socket, with axum, reqwest and rustls) sits above it and is handed in by the
//! `runner` binary as [`crate::trial::JobBridge::bridge`]. The engine therefore builds without
//! an HTTP stack, and its tests drive a fake bridge (`tests/model_bridge.rs`).
//!
//! A trial's life on the bridge, as `trial/bridge.rs` and `trial/agent.rs` drive it: started
//! before its container exists ([`ModelBridge::start_trial`]; the socket directory is
//! bind-mounted in, the agent's env carries the trial's token), its in-container relay started
//! once the environment is ready ([`BridgedTrial::relay_serve_command`]), served only during the
//! agent's turns ([`BridgedTrial::resume`] / [`BridgedTrial::pause`]), and closed when the agent
//! phase ends ([`BridgedTrial::close`]), which yields what it spent.

use std::fmt;
use std::path::Path;

use futures_util::future::BoxFuture;
use tasks::records::{JobLlmUsage, TrialLlmUsage};

/// Why a bridge refused a trial or failed to close it (the implementation's own error, kept as
/// the source so its chain is printed).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ModelBridgeError(Box<dyn std::error::Error + Send + Sync>);

impl ModelBridgeError {
    /// Wraps the implementation's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ModelBridgeError(Box::new(error))
    }
}

/// What one trial may spend through the bridge; `None`: no bound of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TrialBudget {
    /// Input plus output tokens.
    pub max_tokens: Option<u64>,
    /// Dollars, by the bridge's price table.
    pub max_cost_usd: Option<f64>,
}

/// A job's LLM bridge: shared by every trial of the job, it holds the upstream keys, the price
/// table and the job's budget.
pub trait ModelBridge: Send + Sync + fmt::Debug {
    /// Starts serving one trial (before its container is created): the trial may call the
    /// `models` given, within the per-trial budget the implementation was configured with, and
    /// its call records go under `<trial_dir>/llm/`. The engine pauses it at once and resumes
    /// it for each agent turn.
    fn start_trial<'a>(
        &'a self,
        trial_name: &'a str,
        models: &'a [String],
        trial_dir: &'a Path,
    ) -> BoxFuture<'a, Result<Box<dyn BridgedTrial>, ModelBridgeError>>;

    /// Each trial's own budget (what `run --dry-run` shows).
    fn trial_budget(&self) -> TrialBudget;

    /// Why no more trials may start, once the job's budget is spent (`None` while it is not).
    fn budget_stop(&self) -> Option<String>;

    /// The job's totals so far over every trial attempt served, for result.json. The
    /// scheduler's own fields (`n_trials_not_run_for_budget`, and a budget stop it saw first)
    /// are the engine's to fill.
    fn job_usage(&self) -> JobLlmUsage;
}

/// One trial's share of the job's bridge. Dropping it without [`BridgedTrial::close`] must still
/// revoke the trial's token.
pub trait BridgedTrial: Send + Sync + fmt::Debug {
    /// The trial's token, which the agent uses as its API key (the secret check of the agent's
    /// env lets exactly this value through).
    fn token(&self) -> &str;

    /// The host directory to bind-mount (read-only) at [`BridgedTrial::container_dir`]: the
    /// socket and the relay executable.
    fn socket_dir(&self) -> &Path;

    /// Where [`BridgedTrial::socket_dir`] appears in the container.
    fn container_dir(&self) -> &str;

    /// The socket itself (named in the trial's log).
    fn socket_path(&self) -> &Path;

    /// The relay's port on the container's loopback.
    fn relay_port(&self) -> u16;

    /// The agent's LLM settings: base URLs at the relay and the token as API keys.
    fn agent_env(&self) -> Vec<(String, String)>;

    /// The command (argv) that starts the relay in the container; run detached, as root.
    fn relay_serve_command(&self) -> Vec<String>;

    /// The command (argv) that exits 0 once the relay listens, or 1 after `timeout_ms`.
    fn relay_wait_command(&self, timeout_ms: u64) -> Vec<String>;

    /// A shell command (for `sh`) the agent's command is followed by, in the same shell, that
    /// pauses the trial from inside the container and never fails the shell.
    fn end_turn_command(&self) -> String;

    /// Stops serving calls (the agent's turn is over). Idempotent.
    fn pause(&self);

    /// Serves calls again (the agent's next turn). A closed trial stays closed.
    fn resume(&self);

    /// Revokes the token, lets running calls finish, writes `<trial>/llm/usage.json` and
    /// returns what the trial spent.
    fn close(self: Box<Self>) -> BoxFuture<'static, Result<TrialLlmUsage, ModelBridgeError>>;
}
