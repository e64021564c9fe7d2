//! The figures a leaderboard publishes, computed with the shared metric functions, and their
//! task-clustered 95% intervals from the `stats` crate.

use std::collections::BTreeMap;

use stats::Resampling;
use tasks::metrics;

use super::report::{Figures, IntervalMethod};
use super::trial::TrialFacts;

/// Figures over all trials (grouped by task name; trials without a task name are their own
/// group so they still count against accuracy).
pub fn compute(
    n_jobs: usize,
    trials: &[TrialFacts],
    trials_per_task: BTreeMap<String, usize>,
) -> Figures {
    let mut by_task: BTreeMap<&str, Vec<Option<f64>>> = BTreeMap::new();
    let mut errored: BTreeMap<String, usize> = BTreeMap::new();
    for trial in trials {
        by_task
            .entry(trial.task.as_deref().unwrap_or("(unknown task)"))
            .or_default()
            .push(trial.reward);
        if let Some(kind) = &trial.exception_type {
            *errored.entry(kind.clone()).or_default() += 1;
        }
    }
    let groups = || by_task.values().map(Vec::as_slice);
    let accuracy = metrics::leaderboard_accuracy(groups());
    let resampling = Resampling::default();
    let rewards = stats::summarize(groups(), &resampling);
    // Accuracy is the mean of the success indicator (reward > 0, errors 0), so its interval
    // is the same estimator over those indicators.
    let successes: Vec<Vec<Option<f64>>> = by_task
        .values()
        .map(|t| {
            t.iter()
                .map(|r| Some(if r.is_some_and(|v| v > 0.0) { 1.0 } else { 0.0 }))
                .collect()
        })
        .collect();
    let success = stats::summarize(successes.iter().map(Vec::as_slice), &resampling);
    Figures {
        n_jobs,
        n_tasks: accuracy.n_tasks,
        n_trials: trials.len(),
        n_errored: errored.values().sum(),
        n_successes: accuracy.n_successes,
        accuracy: accuracy.accuracy,
        accuracy_stderr: accuracy.stderr,
        mean_reward: rewards.mean.value,
        accuracy_ci: success.mean.ci,
        mean_reward_ci: rewards.mean.ci,
        pass_at_k: rewards
            .pass_at_k
            .iter()
            .map(|p| (p.k.to_string(), p.value))
            .collect(),
        pass_at_k_ci: rewards
            .pass_at_k
            .iter()
            .filter_map(|p| Some((p.k.to_string(), p.ci?)))
            .collect(),
        interval: IntervalMethod {
            level: stats::LEVEL,
            method: rewards.interval_method,
            resamples: resampling.resamples,
            seed: resampling.seed,
        },
        trials_per_task,
        errored_by_exception_type: errored,
        models_called: Vec::new(),
        n_planned_trials: trials.len(),
        leaderboard_accuracy: accuracy.accuracy,
    }
}

/// The accuracy as the leaderboard computes it: successes over every planned trial, errored
/// and missing ones counting as 0 (`accuracy` divides by the trials present).
pub fn add_leaderboard_accuracy(figures: &mut Figures, n_planned: usize) {
    figures.n_planned_trials = n_planned;
    figures.leaderboard_accuracy = if n_planned == 0 {
        0.0
    } else {
        figures.n_successes as f64 / n_planned as f64
    };
}
