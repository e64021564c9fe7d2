//! `<job>/result.json`: Harbor's `JobResult` without `trial_results`.

use super::harbor_026::SchemaVersion;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Per-eval (agent × model × dataset) statistics.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EvalStats {
    /// Trials with rewards.
    pub n_trials: u32,
    /// Trials with an exception.
    pub n_errors: u32,
    /// `[{"mean": x}]`.
    pub metrics: Vec<BTreeMap<String, f64>>,
    /// k → pass@k.
    pub pass_at_k: BTreeMap<String, f64>,
    /// Reward name → value → trial names.
    pub reward_stats: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Exception type → trial names.
    pub exception_stats: BTreeMap<String, Vec<String>>,
    /// Runner-only: the mean reward and pass@k with 95% intervals clustered by task (trials
    /// of one task are not independent). Absent in Harbor's records; Harbor ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<EvalIntervals>,
}

/// Runner-only: an eval's estimates with their uncertainty (see docs/statistics.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EvalIntervals {
    /// How the intervals are computed (`cluster bootstrap over tasks, percentile`).
    pub method: String,
    /// The intervals' level (0.95).
    pub level: f64,
    /// Bootstrap resamples behind each interval.
    pub resamples: u64,
    /// The resampling's seed: the same seed gives the same interval.
    pub seed: u64,
    /// Mean reward over all trials, errors counting 0 (`metrics[0].mean`).
    pub mean: EstimateInterval,
    /// Cluster-robust standard error of the mean (none with fewer than two tasks).
    pub mean_stderr_clustered: Option<f64>,
    /// Tasks with at least one trial.
    pub n_tasks: u64,
    /// Trials counted.
    pub n_trials: u64,
    /// k → pass@k with its interval (only when every reward is 0, 1 or missing).
    pub pass_at_k: BTreeMap<String, EstimateInterval>,
}

/// A point estimate and its interval (`low`/`high` are none with fewer than two tasks).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EstimateInterval {
    /// The estimate.
    pub value: f64,
    /// Lower bound.
    pub low: Option<f64>,
    /// Upper bound.
    pub high: Option<f64>,
}

/// Job progress and evals.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobStats {
    /// Finished trials.
    pub n_completed_trials: u32,
    /// Trials with an exception.
    pub n_errored_trials: u32,
    /// Running now.
    pub n_running_trials: u32,
    /// Not started.
    pub n_pending_trials: u32,
    /// Cancelled.
    pub n_cancelled_trials: u32,
    /// Retries.
    pub n_retries: u32,
    /// Eval key → stats.
    pub evals: BTreeMap<String, EvalStats>,
    /// Token totals.
    pub n_input_tokens: Option<u64>,
    /// Token totals.
    pub n_cache_tokens: Option<u64>,
    /// Token totals.
    pub n_output_tokens: Option<u64>,
    /// Cost total.
    pub cost_usd: Option<f64>,
}

/// `<job>/result.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobResult {
    /// Harbor 0.26's document version (1; older records omit it).
    #[serde(default)]
    pub schema_version: SchemaVersion,
    /// Job id.
    pub id: String,
    /// Start.
    pub started_at: DateTime<Utc>,
    /// Last update.
    pub updated_at: DateTime<Utc>,
    /// End (null while running).
    pub finished_at: Option<DateTime<Utc>>,
    /// Planned trials.
    pub n_total_trials: u32,
    /// Statistics.
    pub stats: JobStats,
    /// Runner-only: planned trials by outcome, and the share scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// Runner-only: what the job spent through the LLM bridge, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_bridge: Option<JobLlmUsage>,
    /// Runner-only: the part of the plan this job ran (`--shard I/N`), as in config.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// Runner-only: the parts the plan was split into, as in config.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_shards: Option<u32>,
}

/// Runner-only: the LLM bridge's totals over a job, every attempt included (retried ones
/// too, unlike sums over the final trial records), and whether its budget stopped it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobLlmUsage {
    /// Input tokens, cache reads and writes included.
    pub n_input_tokens: u64,
    /// Cache reads.
    pub n_cache_tokens: u64,
    /// Cache writes (part of `n_input_tokens`).
    pub n_cache_write_tokens: u64,
    /// Output tokens.
    pub n_output_tokens: u64,
    /// Dollars over priced calls; `None` when every model called was unpriced.
    pub cost_usd: Option<f64>,
    /// Calls, refused calls (model or budget) and failed calls.
    pub n_calls: u64,
    /// Calls refused (undeclared model, budget).
    pub n_refused_calls: u64,
    /// Calls that failed upstream or on the way.
    pub n_failed_calls: u64,
    /// Trial attempts the bridge served.
    pub n_trials: u64,
    /// Declared models actually called.
    pub models_called: Vec<String>,
    /// Models called that the price table does not price (metered in tokens only).
    pub unpriced_models: Vec<String>,
    /// Why the job budget ran out, once it has.
    pub budget_exhausted: Option<String>,
    /// Planned trials not started because the job budget ran out (counted in
    /// `coverage.not_run`; never scored).
    pub n_trials_not_run_for_budget: u32,
}

/// Runner-only: how much of a job produced data. `fraction` is `scored / planned`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Coverage {
    /// Trials planned (k × runnable tasks).
    pub planned: u32,
    /// Trials with a reward.
    pub scored: u32,
    /// Trials the agent failed without a reward (0 on leaderboards).
    pub agent_error: u32,
    /// Trials without data because the infrastructure failed, after retries.
    pub infra_error: u32,
    /// Planned trials with no final record (interrupted before they ran or finished).
    pub not_run: u32,
    /// Attempts beyond each trial's first, over all trials: retries of infrastructure errors,
    /// and re-runs of trials a resume found unfinished or was asked to run again.
    pub retries: u32,
    /// `scored / planned` (1 for an empty plan).
    pub fraction: f64,
}
