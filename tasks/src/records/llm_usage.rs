//! What one trial's agent spent through the runner's LLM bridge: `<trial>/llm/usage.json`, and
//! the totals the trial's `agent_result` takes from it. The bridge (runner/llm-bridge) counts
//! and writes it; the engine fills the trial record from it; the format lives here, with the
//! other records, so the engine needs nothing of the bridge's HTTP stack to read it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::AgentContext;

/// What one trial's agent spent through the bridge: written to `agent/llm/usage.json` on close
/// and meant for the trial's `agent_result` (see [`TrialLlmUsage::fill_agent_context`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialLlmUsage {
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

impl TrialLlmUsage {
    /// Adds another trial's totals (for job totals kept by the runner).
    pub fn merge(&mut self, other: &TrialLlmUsage) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_is_unknown_only_when_every_model_called_is_unpriced() {
        let mut usage = TrialLlmUsage {
            n_input_tokens: 7,
            cost_usd: 0.25,
            models_called: ["a".to_owned(), "b".to_owned()].into(),
            unpriced_models: ["b".to_owned()].into(),
            ..TrialLlmUsage::default()
        };
        assert_eq!(usage.reported_cost_usd(), Some(0.25));
        let mut context = AgentContext::default();
        usage.fill_agent_context(&mut context);
        assert_eq!(
            (context.n_input_tokens, context.cost_usd),
            (Some(7), Some(0.25))
        );
        let extras = &context.metadata.as_ref().unwrap()["llm_bridge"];
        assert!(extras["cost_note"].is_string(), "{extras}");
        usage.models_called.remove("a");
        assert_eq!(usage.reported_cost_usd(), None);
        let mut both = usage.clone();
        both.merge(&usage);
        assert_eq!(both.n_input_tokens, 14);
    }
}
