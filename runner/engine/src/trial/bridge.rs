//! A trial's share of the job's LLM bridge: its grant is started before the container is made
//! (the socket directory is bind-mounted in and the agent's env carries the trial's token),
//! the in-container relay is started once the environment is ready, and the grant is closed
//! when the agent phase ends, its metered usage written into `agent_result`.

use tasks::ExceptionType;

use super::Trial;
use super::relay::{self, RELAY_WAIT_MS};
use crate::backend::{Backend, BindMount, EnvironmentSpec};
use crate::failure::TrialFailure;
use crate::model_bridge::BridgedTrial;

/// Where the relay's own complaints go inside the container (read back if it fails).
const RELAY_LOG: &str = "/tmp/runner-llm-bridge-relay.log";
/// The relay's pid inside the container, so closing can stop exactly that process.
const RELAY_PID: &str = "/tmp/runner-llm-bridge-relay.pid";

/// The trial's share of the job's LLM bridge: its grant (from before the container is made
/// until the agent phase ends) and the relay's pid in the container while it runs.
#[derive(Default)]
pub(super) struct TrialBridge {
    pub(super) grant: Option<Box<dyn BridgedTrial>>,
    relay_pid: Option<u32>,
}

fn bridge_failure(message: impl Into<String>) -> TrialFailure {
    TrialFailure::new(ExceptionType::LlmBridgeError, message)
}

impl<B: Backend> Trial<B> {
    /// Starts this trial's grant (before the container exists) and adds its socket mount and
    /// the agent's env to `spec`. Without a job bridge, `spec` is returned as it is.
    pub(super) async fn with_bridge(
        &mut self,
        mut spec: EnvironmentSpec,
    ) -> Result<EnvironmentSpec, TrialFailure> {
        let Some(job) = self.ctx.bridge.clone() else {
            return Ok(spec);
        };
        let trial = match &self.bridge.grant {
            Some(trial) => trial,
            None => {
                let name = self.name().to_owned();
                let trial = job
                    .bridge
                    .start_trial(&name, &job.models, &self.dir)
                    .await
                    .map_err(|e| {
                        bridge_failure(format!("the LLM bridge refused this trial: {e}"))
                    })?;
                // Served only during the agent's turns (see `agent_turn`), not its setup.
                trial.pause();
                self.log.line(&format!(
                    "LLM bridge: serving models {} on {}",
                    job.models.join(", "),
                    trial.socket_path().display()
                ));
                self.bridge.grant.insert(trial)
            }
        };
        spec.main.mounts.push(BindMount {
            host: trial.socket_dir().to_path_buf(),
            container: trial.container_dir().to_owned(),
            read_only: true,
            tests_egress: false,
        });
        spec.main.env.extend(trial.agent_env());
        if !job.allow_container_secrets {
            adapter::secrets::check_container_env_with_bridge(&spec.main.env, trial.token())
                .map_err(|e| TrialFailure::new(ExceptionType::AgentSetupError, e.to_string()))?;
        }
        Ok(spec)
    }

    /// Starts the relay in the running container, as root and detached, and waits until it
    /// listens. Does nothing without a bridge.
    pub(super) async fn start_bridge_relay(&mut self) -> Result<(), TrialFailure> {
        let Some(trial) = &self.bridge.grant else {
            return Ok(());
        };
        let sandbox = self.sandbox()?;
        let serve = trial.relay_serve_command();
        let wait = trial.relay_wait_command(RELAY_WAIT_MS);
        let pid = relay::start_relay(&sandbox, &serve, &wait, RELAY_LOG, RELAY_PID)
            .await
            .map_err(|e| bridge_failure(format!("LLM bridge: {e}")))?;
        self.bridge.relay_pid = Some(pid);
        self.log.line(&format!(
            "LLM bridge: relay listening on 127.0.0.1:{} in the container",
            trial.relay_port()
        ));
        Ok(())
    }

    /// Stops the relay in the container (the relay is the runner's, not the agent's): before
    /// each verification, so it is neither reported as an agent leftover nor a way to the
    /// bridge while tests run. Best effort: closing revokes the token either way. Does nothing
    /// without a bridge.
    pub(super) async fn stop_bridge_relay(&mut self) {
        let Some(pid) = self.bridge.relay_pid.take() else {
            return;
        };
        let Ok(sandbox) = self.sandbox() else {
            return;
        };
        if !relay::stop_relay(&sandbox, pid, RELAY_PID).await {
            self.log
                .line("LLM bridge: could not stop the relay in the container");
        }
    }

    /// Stops the relay, revokes the trial's token, writes `llm/usage.json` and puts the
    /// metered totals into `agent_result` (the bridge's counts replace what the agent said of
    /// itself). Safe to call twice; does nothing without a bridge.
    pub(super) async fn close_bridge(&mut self) {
        if self.bridge.grant.is_none() {
            return;
        }
        self.stop_bridge_relay().await;
        let Some(trial) = self.bridge.grant.take() else {
            return;
        };
        match trial.close().await {
            Ok(usage) => {
                let context = self
                    .result
                    .agent_result
                    .get_or_insert_with(Default::default);
                usage.fill_agent_context(context);
                self.log.line(&format!(
                    "LLM bridge: {} call(s), {} refused, {} failed; {} input ({} cached), {} output tokens; cost {}; models called: {}",
                    usage.n_calls,
                    usage.n_refused_calls,
                    usage.n_failed_calls,
                    usage.n_input_tokens,
                    usage.n_cache_tokens,
                    usage.n_output_tokens,
                    usage
                        .reported_cost_usd()
                        .map_or("unknown (unpriced models)".to_owned(), |c| format!("${c:.6}")),
                    if usage.models_called.is_empty() {
                        "none".to_owned()
                    } else {
                        usage.models_called.iter().cloned().collect::<Vec<_>>().join(", ")
                    }
                ));
                if let Some(reason) = &usage.budget_exhausted {
                    self.log.line(&format!(
                        "LLM bridge: calls were refused for budget: {reason}"
                    ));
                }
            }
            Err(e) => self.log.line(&format!("LLM bridge: closing failed: {e}")),
        }
    }
}
