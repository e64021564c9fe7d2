//! The end-of-run summary of any job dir: per task trials, errors, mean and pass@k; overall
//! mean with its task-clustered interval for every reward key; a title naming dataset, agent
//! and model. Serializable for `--format json`, and rendered as plain text.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use stats::{Interval, Resampling, TaskSetStats};
use tasks::metrics;

use crate::ViewerError;
use crate::load::{self, Job, Trial, Usage};

/// The `schema` of [`JobSummary`]'s JSON form; bumped on incompatible changes.
pub const SUMMARY_SCHEMA: &str = "runner.summary/v1";

/// What was run: dataset, agent and model, from the job config or else the trials (several
/// distinct values are joined with ", ").
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Title {
    /// Dataset name (or local dataset dir name).
    pub dataset: Option<String>,
    /// Agent name.
    pub agent: Option<String>,
    /// Model, `provider/name`.
    pub model: Option<String>,
}

impl Title {
    /// `dataset · agent · model`, skipping what is unknown.
    pub fn text(&self) -> String {
        let parts: Vec<&str> = [&self.dataset, &self.agent, &self.model]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if parts.is_empty() {
            "(dataset, agent and model not recorded)".into()
        } else {
            parts.join(" · ")
        }
    }
}

/// One task's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSummary {
    /// Task name.
    pub task: String,
    /// Finished trials.
    pub trials: usize,
    /// Trials with an exception.
    pub errors: usize,
    /// Mean main reward (missing as 0).
    pub mean: f64,
    /// 95% Wilson interval of the task's solve rate; only for 0/1 rewards.
    pub mean_ci: Option<Interval>,
    /// Mean of every reward key (missing as 0).
    pub rewards: BTreeMap<String, f64>,
    /// The task's unbiased pass@k for the job's k values, by k.
    pub pass_at_k: BTreeMap<u64, f64>,
    /// Some trial had reward > 0.
    pub solved: bool,
}

/// The statistics of one reward key over the job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardStats {
    /// The key in `verifier_result.rewards`.
    pub key: String,
    /// Mean with interval and pass@k.
    #[serde(flatten)]
    pub stats: TaskSetStats,
}

/// The summary of one job dir.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    /// Always [`SUMMARY_SCHEMA`].
    pub schema: &'static str,
    /// The job dir as given (several read as one: joined with " + ").
    pub job_dir: String,
    /// `job_name`, else the dir's name.
    pub job_name: String,
    /// Dataset, agent, model.
    pub title: Title,
    /// Trial dirs found.
    pub n_trials: usize,
    /// Trials with a result.json; only these count in the figures.
    pub n_finished: usize,
    /// Trials without a result.json (running, or interrupted).
    pub n_unfinished: usize,
    /// Finished trials with an exception.
    pub n_errored: usize,
    /// Tasks with a finished trial.
    pub n_tasks: usize,
    /// The main reward (`reward`, else each trial's first name in sort order): mean with its
    /// interval, and pass@k. This is Harbor's `Mean`.
    pub main: TaskSetStats,
    /// Every reward key seen, `reward` first, then in order of appearance.
    pub rewards: Vec<RewardStats>,
    /// Per task, by name.
    pub tasks: Vec<TaskSummary>,
    /// Errored trials by exception type.
    pub errors_by_type: BTreeMap<String, usize>,
    /// Tokens and cost, totalled over the trials that reported them.
    pub usage: Usage,
    /// Problems met while reading the job dir (unreadable records), for the reader to check.
    pub problems: Vec<String>,
}

/// Reads the job dir `dir` and summarizes it.
pub fn summary(dir: &Path) -> Result<JobSummary, ViewerError> {
    Ok(summarize_job(&load::load_job(dir)?, &Resampling::default()))
}

/// Reads the job dirs `dirs` as one job (see [`crate::load_jobs`]) and summarizes it.
pub fn summary_of(dirs: &[std::path::PathBuf]) -> Result<JobSummary, ViewerError> {
    let mut summary = summarize_job(&crate::union::load_jobs(dirs)?, &Resampling::default());
    if dirs.len() > 1 {
        summary.job_dir = dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(" + ");
    }
    Ok(summary)
}

fn join_unique(values: impl IntoIterator<Item = String>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for v in values {
        if !v.is_empty() && !seen.contains(&v) {
            seen.push(v);
        }
    }
    (!seen.is_empty()).then(|| seen.join(", "))
}

fn strings_at(config: Option<&Value>, list: &str, field: &str) -> Vec<String> {
    config
        .and_then(|c| c.get(list))
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| match item.get(field).and_then(Value::as_str) {
                    Some(s) => Some(s.to_owned()),
                    // A local dataset has a path instead of a name.
                    None if field == "name" && list == "datasets" => {
                        item.get("path").and_then(Value::as_str).map(|p| {
                            p.trim_end_matches('/')
                                .rsplit('/')
                                .next()
                                .unwrap_or(p)
                                .to_owned()
                        })
                    }
                    None => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The title of `job`: the job config's datasets and agents, else what the trials recorded.
pub fn title_of(job: &Job) -> Title {
    let config = job.config.as_ref();
    let or_trials = |from_config: Vec<String>, pick: fn(&Trial) -> Option<&String>| {
        join_unique(from_config)
            .or_else(|| join_unique(job.trials.iter().filter_map(pick).cloned()))
    };
    Title {
        dataset: or_trials(strings_at(config, "datasets", "name"), |t| {
            t.source.as_ref()
        }),
        agent: or_trials(strings_at(config, "agents", "name"), |t| t.agent.as_ref()),
        model: or_trials(strings_at(config, "agents", "model_name"), |t| {
            t.model.as_ref()
        }),
    }
}

/// Every reward key of the finished trials: `reward` first, then in order of appearance.
fn reward_keys(trials: &[&Trial]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for trial in trials {
        for (key, _) in &trial.rewards {
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
    }
    if let Some(i) = keys.iter().position(|k| k == "reward") {
        let key = keys.remove(i);
        keys.insert(0, key);
    }
    keys
}

/// Summarizes a loaded job with intervals under `resampling`.
pub fn summarize_job(job: &Job, resampling: &Resampling) -> JobSummary {
    let finished: Vec<&Trial> = job.trials.iter().filter(|t| t.finished).collect();
    let mut by_task: BTreeMap<&str, Vec<&Trial>> = BTreeMap::new();
    for trial in &finished {
        by_task.entry(trial.task.as_str()).or_default().push(trial);
    }
    let main_groups: Vec<Vec<Option<f64>>> = by_task
        .values()
        .map(|ts| ts.iter().map(|t| t.reward()).collect())
        .collect();
    let main = stats::summarize(main_groups.iter().map(Vec::as_slice), resampling);
    let keys = reward_keys(&finished);
    let rewards = keys
        .iter()
        .map(|key| {
            let groups: Vec<Vec<Option<f64>>> = by_task
                .values()
                .map(|ts| ts.iter().map(|t| t.reward_of(key)).collect())
                .collect();
            RewardStats {
                key: key.clone(),
                stats: stats::summarize(groups.iter().map(Vec::as_slice), resampling),
            }
        })
        .collect();
    let ks: Vec<u64> = main.pass_at_k.iter().map(|p| p.k).collect();
    let tasks = by_task
        .iter()
        .zip(&main_groups)
        .map(|((task, trials), rewards)| {
            let n = rewards.len();
            let binary = rewards
                .iter()
                .all(|r| matches!(r, None | Some(0.0) | Some(1.0)));
            let c = rewards.iter().filter(|r| **r == Some(1.0)).count();
            TaskSummary {
                task: (*task).to_owned(),
                trials: n,
                errors: trials.iter().filter(|t| t.exception.is_some()).count(),
                mean: metrics::mean(rewards),
                mean_ci: if binary {
                    stats::wilson_interval(c, n)
                } else {
                    None
                },
                rewards: keys
                    .iter()
                    .map(|key| {
                        let values: Vec<Option<f64>> =
                            trials.iter().map(|t| t.reward_of(key)).collect();
                        (key.clone(), metrics::mean(&values))
                    })
                    .collect(),
                pass_at_k: ks
                    .iter()
                    .map(|&k| (k, metrics::pass_at_k_estimate(n as u64, c as u64, k)))
                    .collect(),
                solved: rewards.iter().any(|r| r.is_some_and(|v| v > 0.0)),
            }
        })
        .collect();
    let mut errors_by_type = BTreeMap::new();
    let mut usage = Usage::default();
    for trial in &finished {
        if let Some(e) = &trial.exception {
            *errors_by_type.entry(e.kind.clone()).or_default() += 1;
        }
        usage.add(&trial.usage);
    }
    let mut problems = job.problems.clone();
    for trial in &job.trials {
        problems.extend(trial.problems.iter().map(|p| format!("{}/{p}", trial.name)));
    }
    JobSummary {
        schema: SUMMARY_SCHEMA,
        job_dir: job.dir.display().to_string(),
        job_name: job.name.clone(),
        title: title_of(job),
        n_trials: job.trials.len(),
        n_finished: finished.len(),
        n_unfinished: job.trials.len() - finished.len(),
        n_errored: finished.iter().filter(|t| t.exception.is_some()).count(),
        n_tasks: by_task.len(),
        main,
        rewards,
        tasks,
        errors_by_type,
        usage,
        problems,
    }
}
