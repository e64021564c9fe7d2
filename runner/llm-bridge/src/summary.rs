//! How the bridge counts usage: a trial's totals ([`TrialUsage`], the `usage.json` format
//! `tasks::records::TrialLlmUsage`) grow by each finished call, and a job's are their sum.

use serde::{Deserialize, Serialize};
use tasks::records::TrialLlmUsage;

use crate::policy::Spend;
use crate::record::CallOutcome;
use crate::usage::Usage;

/// What one trial's agent spent through the bridge (the record format, owned by `tasks`).
pub type TrialUsage = TrialLlmUsage;

/// Tokens and dollars of a trial's totals, as budgets count them (`TrialUsage` is `tasks`'
/// type, so this and [`record_call`] are functions, not methods).
pub fn spend(usage: &TrialUsage) -> Spend {
    Spend {
        tokens: usage.n_input_tokens + usage.n_output_tokens,
        cost_usd: usage.cost_usd,
    }
}

/// A finished call as the totals count it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SettledCall<'a> {
    pub outcome: CallOutcome,
    pub declared: Option<&'a str>,
    pub usage: Option<&'a Usage>,
    pub cost_usd: Option<f64>,
    /// The usage is a charge estimated from the hold, not the provider's report.
    pub estimated: bool,
}

/// Counts one finished call in a trial's (or the job's) totals.
pub(crate) fn record_call(totals: &mut TrialUsage, call: SettledCall<'_>) {
    let SettledCall {
        outcome,
        declared,
        usage,
        cost_usd,
        estimated,
    } = call;
    if outcome == CallOutcome::Refused {
        totals.n_refused_calls += 1;
        return;
    }
    totals.n_calls += 1;
    if outcome != CallOutcome::Ok {
        totals.n_failed_calls += 1;
    }
    if let Some(declared) = declared {
        totals.models_called.insert(declared.to_owned());
        if usage.is_some() && cost_usd.is_none() {
            totals.unpriced_models.insert(declared.to_owned());
        }
    }
    if estimated {
        totals.n_calls_charged_estimate += 1;
        totals.n_calls_without_usage += 1;
    }
    match usage {
        Some(usage) => {
            totals.n_input_tokens += usage.n_input_tokens;
            totals.n_cache_tokens += usage.n_cache_tokens;
            totals.n_cache_write_tokens += usage.n_cache_write_tokens;
            totals.n_output_tokens += usage.n_output_tokens;
        }
        None if !estimated => totals.n_calls_without_usage += 1,
        None => {}
    }
    totals.cost_usd += cost_usd.unwrap_or(0.0);
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
    use tasks::records::AgentContext;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            n_input_tokens: input,
            n_cache_tokens: 1,
            n_cache_write_tokens: 0,
            n_output_tokens: output,
        }
    }

    /// A finished call for [`record_all`]: outcome, declared model, the `(input, output)`
    /// tokens its provider reported, and its cost.
    type Call = (
        CallOutcome,
        Option<&'static str>,
        Option<(u64, u64)>,
        Option<f64>,
    );

    /// Counts each of `calls` in `totals`, with the provider's own usage report.
    fn record_all(totals: &mut TrialUsage, calls: &[Call]) {
        for &(outcome, declared, tokens, cost) in calls {
            let reported = tokens.map(|(input, output)| usage(input, output));
            let call = SettledCall {
                outcome,
                declared,
                usage: reported.as_ref(),
                cost_usd: cost,
                estimated: false,
            };
            record_call(totals, call);
        }
    }

    #[test]
    fn calls_add_up_and_refusals_do_not_count_tokens() {
        let mut trial = TrialUsage::default();
        record_all(
            &mut trial,
            &[
                (CallOutcome::Ok, Some("openai/a"), Some((10, 2)), Some(0.5)),
                (CallOutcome::Ok, Some("b"), Some((5, 1)), None),
                (CallOutcome::Refused, None, None, None),
                (CallOutcome::UpstreamError, Some("openai/a"), None, None),
            ],
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
        assert_eq!(spend(&trial).tokens, 18);

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
        record_all(
            &mut trial,
            &[(CallOutcome::Ok, Some("b"), Some((5, 1)), None)],
        );
        assert_eq!(trial.reported_cost_usd(), None);
        let mut job = TrialUsage::default();
        job.merge(&trial);
        job.merge(&trial);
        assert_eq!(job.n_input_tokens, 10);
        assert_eq!(TrialUsage::default().reported_cost_usd(), Some(0.0));
    }
}
