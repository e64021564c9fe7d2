//! This bridge behind the engine's seam (`engine::model_bridge`): [`JobModelBridge`] is what the
//! `runner` binary hands the engine, and a [`TrialBridge`] is the engine's `BridgedTrial`.

use std::path::Path;

use engine::{BridgedTrial, ModelBridge, ModelBridgeError, TrialBudget};
use futures_util::future::BoxFuture;
use tasks::records::{JobLlmUsage, TrialLlmUsage};

use crate::bridge::{Bridge, CONTAINER_BRIDGE_DIR, TrialGrant};
use crate::config::Budget;
use crate::trial::TrialBridge;

/// A job's bridge with the budget each of its trials gets.
#[derive(Debug, Clone)]
pub struct JobModelBridge {
    /// The job's bridge (keys, prices, the job's budget).
    pub bridge: Bridge,
    /// Each trial's own budget.
    pub trial_budget: Budget,
}

impl ModelBridge for JobModelBridge {
    fn start_trial<'a>(
        &'a self,
        trial_name: &'a str,
        models: &'a [String],
        trial_dir: &'a Path,
    ) -> BoxFuture<'a, Result<Box<dyn BridgedTrial>, ModelBridgeError>> {
        let mut grant = TrialGrant::new(trial_name, models.to_vec(), trial_dir);
        grant.budget = self.trial_budget;
        Box::pin(async move {
            let trial = self
                .bridge
                .start_trial(grant)
                .await
                .map_err(ModelBridgeError::new)?;
            Ok(Box::new(trial) as Box<dyn BridgedTrial>)
        })
    }

    fn trial_budget(&self) -> TrialBudget {
        TrialBudget {
            max_tokens: self.trial_budget.max_tokens,
            max_cost_usd: self.trial_budget.max_cost_usd,
        }
    }

    fn budget_stop(&self) -> Option<String> {
        self.bridge.job_budget_reason()
    }

    fn job_usage(&self) -> JobLlmUsage {
        let usage = self.bridge.job_usage();
        let totals = &usage.totals;
        JobLlmUsage {
            n_input_tokens: totals.n_input_tokens,
            n_cache_tokens: totals.n_cache_tokens,
            n_cache_write_tokens: totals.n_cache_write_tokens,
            n_output_tokens: totals.n_output_tokens,
            cost_usd: totals.reported_cost_usd(),
            n_calls: totals.n_calls,
            n_refused_calls: totals.n_refused_calls,
            n_failed_calls: totals.n_failed_calls,
            n_trials: usage.n_trials,
            models_called: totals.models_called.iter().cloned().collect(),
            unpriced_models: totals.unpriced_models.iter().cloned().collect(),
            budget_exhausted: usage.budget_exhausted,
            n_trials_not_run_for_budget: 0,
        }
    }
}

// Each method names `TrialBridge`'s inherent one explicitly: the trait's share their names.
impl BridgedTrial for TrialBridge {
    fn token(&self) -> &str {
        TrialBridge::token(self)
    }

    fn socket_dir(&self) -> &Path {
        TrialBridge::socket_dir(self)
    }

    fn container_dir(&self) -> &str {
        CONTAINER_BRIDGE_DIR
    }

    fn socket_path(&self) -> &Path {
        TrialBridge::socket_path(self)
    }

    fn relay_port(&self) -> u16 {
        TrialBridge::relay_port(self)
    }

    fn agent_env(&self) -> Vec<(String, String)> {
        TrialBridge::agent_env(self)
    }

    fn relay_serve_command(&self) -> Vec<String> {
        TrialBridge::relay_serve_command(self)
    }

    fn relay_wait_command(&self, timeout_ms: u64) -> Vec<String> {
        TrialBridge::relay_wait_command(self, timeout_ms)
    }

    fn end_turn_command(&self) -> String {
        TrialBridge::end_turn_command(self)
    }

    fn pause(&self) {
        TrialBridge::pause(self);
    }

    fn resume(&self) {
        TrialBridge::resume(self);
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, Result<TrialLlmUsage, ModelBridgeError>> {
        Box::pin(async move {
            TrialBridge::close(*self)
                .await
                .map_err(ModelBridgeError::new)
        })
    }
}
