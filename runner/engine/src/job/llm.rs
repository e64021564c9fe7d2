//! The job's side of the LLM bridge: the scheduler's budget stop and the job's totals.

use tasks::records::JobLlmUsage;

use crate::context::JobBridge;

/// Why no more trials may start, once the job budget is spent.
pub(super) fn budget_stop(bridge: Option<&JobBridge>) -> Option<String> {
    bridge?.bridge.budget_stop()
}

/// The bridge's totals for result.json; `not_run` trials were never started for budget.
pub(super) fn job_usage(bridge: &JobBridge, stop: Option<String>, not_run: u32) -> JobLlmUsage {
    let usage = bridge.bridge.job_usage();
    JobLlmUsage {
        budget_exhausted: stop.or(usage.budget_exhausted),
        n_trials_not_run_for_budget: not_run,
        ..usage
    }
}

/// The sentence the summary and job.log give a job the budget stopped.
pub fn budget_stop_sentence(usage: &JobLlmUsage) -> Option<String> {
    let reason = usage.budget_exhausted.as_deref()?;
    Some(if usage.n_trials_not_run_for_budget > 0 {
        format!(
            "the job's LLM budget ran out ({reason}): {} planned trial(s) were not run (not scored; resume the job with a larger budget to run them)",
            usage.n_trials_not_run_for_budget
        )
    } else {
        format!("the job's LLM budget ran out ({reason}); later calls were refused")
    })
}

/// One line of the job's LLM totals for the summary.
pub fn usage_line(usage: &JobLlmUsage) -> String {
    format!(
        "LLM bridge: {} call(s) ({} refused, {} failed) in {} trial attempt(s); {} input tokens ({} cached), {} output tokens; cost {}; models called: {}",
        usage.n_calls,
        usage.n_refused_calls,
        usage.n_failed_calls,
        usage.n_trials,
        usage.n_input_tokens,
        usage.n_cache_tokens,
        usage.n_output_tokens,
        usage.cost_usd.map_or_else(
            || "unknown (no priced model was called)".to_owned(),
            |c| format!("${c:.4}")
        ),
        if usage.models_called.is_empty() {
            "none".to_owned()
        } else {
            usage.models_called.join(", ")
        }
    )
}
