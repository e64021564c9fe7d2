//! The end-of-job table: per task trials, mean reward and errors; overall mean and pass@k.

use crate::say;
use std::collections::BTreeMap;

use tasks::metrics;
use tasks::records::TrialResult;

/// One row of the summary table.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// Task name.
    pub task: String,
    /// Trials.
    pub trials: usize,
    /// Mean reward (errors count 0).
    pub mean: f64,
    /// Trials with an exception.
    pub errors: usize,
}

/// Rows per task, sorted by task name.
pub fn task_rows(results: &[TrialResult]) -> Vec<TaskRow> {
    let mut by_task: BTreeMap<&str, Vec<&TrialResult>> = BTreeMap::new();
    for r in results {
        by_task.entry(r.task_name.as_str()).or_default().push(r);
    }
    by_task
        .into_iter()
        .map(|(task, trials)| {
            let rewards: Vec<Option<f64>> = trials.iter().map(|t| t.reward()).collect();
            TaskRow {
                task: task.to_owned(),
                trials: trials.len(),
                mean: metrics::mean(&rewards),
                errors: trials.iter().filter(|t| t.exception_info.is_some()).count(),
            }
        })
        .collect()
}

/// Prints the summary to stdout.
pub fn print_summary(results: &[TrialResult], job_dir: &std::path::Path) {
    let rows = task_rows(results);
    let width = rows.iter().map(|r| r.task.len()).max().unwrap_or(4).max(4);
    say!("");
    say!(
        "{:<width$}  {:>6}  {:>6}  {:>6}",
        "task",
        "trials",
        "mean",
        "errors"
    );
    for row in &rows {
        say!(
            "{:<width$}  {:>6}  {:>6.3}  {:>6}",
            row.task,
            row.trials,
            row.mean,
            row.errors
        );
    }
    let rewards: Vec<Option<f64>> = results.iter().map(|r| r.reward()).collect();
    let per_task: BTreeMap<&str, Vec<Option<f64>>> =
        results.iter().fold(BTreeMap::new(), |mut m, r| {
            m.entry(r.task_name.as_str()).or_default().push(r.reward());
            m
        });
    say!("");
    say!(
        "trials: {}  errors: {}  mean: {:.3}",
        results.len(),
        results
            .iter()
            .filter(|r| r.exception_info.is_some())
            .count(),
        metrics::mean(&rewards)
    );
    let pass = metrics::pass_at_k(per_task.values().map(Vec::as_slice));
    if !pass.is_empty() {
        let text: Vec<String> = pass
            .iter()
            .map(|(k, v)| format!("pass@{k} {v:.3}"))
            .collect();
        say!("{}", text.join("  "));
    }
    let mut exceptions: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results {
        if let Some(e) = &r.exception_info {
            *exceptions.entry(e.exception_type.as_str()).or_default() += 1;
        }
    }
    for (kind, count) in exceptions {
        say!("  {kind}: {count}");
    }
    say!("job: {}", job_dir.display());
}
