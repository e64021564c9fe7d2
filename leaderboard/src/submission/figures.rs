//! The figures a leaderboard publishes, computed with the shared metric functions.

use std::collections::BTreeMap;

use tasks::metrics;

use super::report::Figures;
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
    let all: Vec<Option<f64>> = trials.iter().map(|t| t.reward).collect();
    Figures {
        n_jobs,
        n_tasks: accuracy.n_tasks,
        n_trials: trials.len(),
        n_errored: errored.values().sum(),
        n_successes: accuracy.n_successes,
        accuracy: accuracy.accuracy,
        accuracy_stderr: accuracy.stderr,
        mean_reward: metrics::mean(&all),
        pass_at_k: metrics::pass_at_k(groups())
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        trials_per_task,
        errored_by_exception_type: errored,
    }
}
