//! Usage totals of a trial and of a job, and how they go into Harbor's `AgentContext`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tasks::records::AgentContext;

use crate::policy::Spend;
use crate::record::CallOutcome;
use crate::usage::Usage;

/// What one trial's agent spent through the bridge: written to `agent/llm/usage.json` on close
/// and meant for the trial's `agent_result` (see [`TrialUsage::fill_agent_context`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialUsage {
    /// All input tokens, cached ones included (Harbor's meaning).
    pub n_input_tokens: u64,
    /// Cached input tokens (cache reads).
    pub n_cache_tokens: u64,
    /// Input tokens written to a prompt cache (Anthropic); part of `n_input_tokens`.
    pub n_cache_write_tokens: u64,
    /// Output tokens.
    pub n_output_tokens: u64,
    /// Dollars of the calls whose model has a price; see `unpriced_models` for the rest.
    pub cost_usd: f64,
    /// Declared models that were called (forwarded upstream at least once).
    pub models_called: BTreeSet<String>,
    /// Called models with no price in the table: their tokens are counted, their cost is not.
    pub unpriced_models: BTreeSet<String>,
    /// Calls forwarded upstream.
    pub n_calls: u64,
    /// Calls the bridge refused (model, budget, auth, size, malformed).
    pub n_refused_calls: u64,
    /// Forwarded calls that failed (upstream error status, unreachable, cut off).
    pub n_failed_calls: u64,
    /// Forwarded calls whose response reported no usage, or not all of it.
    pub n_calls_without_usage: u64,
    /// Forwarded calls charged an estimate because their usage never arrived whole (an
    /// aborted or cut-off stream, no usage reported): their reported input or request size,
    /// and their output cap. Their tokens are in the totals above.
    #[serde(default)]
    pub n_calls_charged_estimate: u64,
    /// Calls left out of `calls.jsonl` because the trial's record reached its size cap
    /// (refused calls only; forwarded ones always get their line).
    #[serde(default)]
    pub n_calls_not_recorded: u64,
    /// Why calls were refused for budget, the first time it happened.
    pub budget_exhausted: Option<String>,
}

impl TrialUsage {
    /// Tokens and dollars, as budgets count them.
    pub fn spend(&self) -> Spend {
        Spend {
            tokens: self.n_input_tokens + self.n_output_tokens,
            cost_usd: self.cost_usd,
        }
    }

    /// Counts one finished call.
    pub(crate) fn record_call(
        &mut self,
        outcome: CallOutcome,
        declared: Option<&str>,
        usage: Option<&Usage>,
        cost_usd: Option<f64>,
        estimated: bool,
    ) {
        if outcome == CallOutcome::Refused {
            self.n_refused_calls += 1;
            return;
        }
        self.n_calls += 1;
        if outcome != CallOutcome::Ok {
            self.n_failed_calls += 1;
        }
        if let Some(declared) = declared {
            self.models_called.insert(declared.to_owned());
            if usage.is_some() && cost_usd.is_none() {
                self.unpriced_models.insert(declared.to_owned());
            }
        }
        if estimated {
            self.n_calls_charged_estimate += 1;
            self.n_calls_without_usage += 1;
        }
        match usage {
            Some(usage) => {
                self.n_input_tokens += usage.n_input_tokens;
                self.n_cache_tokens += usage.n_cache_tokens;
                self.n_cache_write_tokens += usage.n_cache_write_tokens;
                self.n_output_tokens += usage.n_output_tokens;
            }
            None if !estimated => self.n_calls_without_usage += 1,
            None => {}
        }
        self.cost_usd += cost_usd.unwrap_or(0.0);
    }

    /// Adds another trial's totals (for job totals kept by the runner).
    pub fn merge(&mut self, other: &TrialUsage) {
        self.n_input_tokens += other.n_input_tokens;
        self.n_cache_tokens += other.n_cache_tokens;
        self.n_cache_write_tokens += other.n_cache_write_tokens;
        self.n_output_tokens += other.n_output_tokens;
        self.cost_usd += other.cost_usd;
        self.models_called
            .extend(other.models_called.iter().cloned());
        self.unpriced_models
            .extend(other.unpriced_models.iter().cloned());
        self.n_calls += other.n_calls;
        self.n_refused_calls += other.n_refused_calls;
        self.n_failed_calls += other.n_failed_calls;
        self.n_calls_without_usage += other.n_calls_without_usage;
        self.n_calls_charged_estimate += other.n_calls_charged_estimate;
        self.n_calls_not_recorded += other.n_calls_not_recorded;
        if self.budget_exhausted.is_none() {
            self.budget_exhausted.clone_from(&other.budget_exhausted);
        }
    }

    /// The cost to report as Harbor's `cost_usd`: `None` (unknown) when every call that
    /// reported usage was unpriced, else the priced calls' sum (a lower bound when some models
    /// are unpriced, which `metadata.llm_bridge.unpriced_models` says).
    pub fn reported_cost_usd(&self) -> Option<f64> {
        let only_unpriced =
            !self.unpriced_models.is_empty() && self.unpriced_models == self.models_called;
        (!only_unpriced).then_some(self.cost_usd)
    }

    /// Writes the totals into Harbor's `AgentContext` fields, and the bridge's extras
    /// (models called, unpriced models, call counts, budget) under `metadata.llm_bridge`.
    pub fn fill_agent_context(&self, context: &mut AgentContext) {
        context.n_input_tokens = Some(self.n_input_tokens);
        context.n_cache_tokens = Some(self.n_cache_tokens);
        context.n_output_tokens = Some(self.n_output_tokens);
        context.cost_usd = self.reported_cost_usd();
        let extras = serde_json::json!({
            "models_called": self.models_called,
            "unpriced_models": self.unpriced_models,
            "n_calls": self.n_calls,
            "n_refused_calls": self.n_refused_calls,
            "n_failed_calls": self.n_failed_calls,
            "n_calls_without_usage": self.n_calls_without_usage,
            "n_calls_charged_estimate": self.n_calls_charged_estimate,
            "n_cache_write_tokens": self.n_cache_write_tokens,
            "budget_exhausted": self.budget_exhausted,
            "cost_note": (!self.unpriced_models.is_empty()).then_some(
                "cost_usd covers priced models only; unpriced models were metered in tokens"
            ),
        });
        context
            .metadata
            .get_or_insert_with(Default::default)
            .insert("llm_bridge".into(), extras);
    }
}

/// The job's totals over every trial the bridge served, retried trials included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobUsage {
    /// Sums over all trials.
    pub totals: TrialUsage,
    /// Trials started on this bridge.
    pub n_trials: u64,
    /// Why the job budget stopped calls (and scheduling), once it has.
    pub budget_exhausted: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            n_input_tokens: input,
            n_cache_tokens: 1,
            n_cache_write_tokens: 0,
            n_output_tokens: output,
        }
    }

    #[test]
    fn calls_add_up_and_refusals_do_not_count_tokens() {
        let mut trial = TrialUsage::default();
        trial.record_call(
            CallOutcome::Ok,
            Some("openai/a"),
            Some(&usage(10, 2)),
            Some(0.5),
            false,
        );
        trial.record_call(CallOutcome::Ok, Some("b"), Some(&usage(5, 1)), None, false);
        trial.record_call(CallOutcome::Refused, None, None, None, false);
        trial.record_call(
            CallOutcome::UpstreamError,
            Some("openai/a"),
            None,
            None,
            false,
        );
        assert_eq!(
            (
                trial.n_input_tokens,
                trial.n_cache_tokens,
                trial.n_output_tokens
            ),
            (15, 2, 3)
        );
        assert_eq!(
            (trial.n_calls, trial.n_refused_calls, trial.n_failed_calls),
            (3, 1, 1)
        );
        assert_eq!(trial.n_calls_without_usage, 1);
        assert_eq!(
            trial.models_called.iter().collect::<Vec<_>>(),
            ["b", "openai/a"]
        );
        assert_eq!(trial.unpriced_models.iter().collect::<Vec<_>>(), ["b"]);
        assert_eq!(trial.reported_cost_usd(), Some(0.5));
        assert_eq!(trial.spend().tokens, 18);

        let mut context = AgentContext::default();
        trial.fill_agent_context(&mut context);
        assert_eq!(context.n_input_tokens, Some(15));
        assert_eq!(context.cost_usd, Some(0.5));
        let extras = &context.metadata.as_ref().unwrap()["llm_bridge"];
        assert_eq!(extras["unpriced_models"], serde_json::json!(["b"]));
        assert!(extras["cost_note"].is_string());
    }

    #[test]
    fn only_unpriced_calls_make_the_cost_unknown() {
        let mut trial = TrialUsage::default();
        trial.record_call(CallOutcome::Ok, Some("b"), Some(&usage(5, 1)), None, false);
        assert_eq!(trial.reported_cost_usd(), None);
        let mut job = TrialUsage::default();
        job.merge(&trial);
        job.merge(&trial);
        assert_eq!(job.n_input_tokens, 10);
        assert_eq!(TrialUsage::default().reported_cost_usd(), Some(0.0));
    }
}
