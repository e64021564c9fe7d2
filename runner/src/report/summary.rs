//! The end-of-job table: per task trials, mean reward and errors; overall mean and pass@k.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tasks::metrics;
use tasks::records::TrialResult;

use crate::say;

/// One row of the summary table.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// Task name.
    pub task: String,
    /// Trials recorded for the task.
    pub trials: usize,
    /// Mean reward, errored trials counting 0.
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
    say!("{}", render_summary(results, job_dir));
}

/// The summary as text: a blank line, the per-task table, totals, pass@k, errors by type and
/// the job directory.
pub fn render_summary(results: &[TrialResult], job_dir: &std::path::Path) -> String {
    let rows = task_rows(results);
    let width = rows.iter().map(|r| r.task.len()).max().unwrap_or(4).max(4);
    let mut out = String::from("\n");
    let _ = writeln!(
        out,
        "{:<width$}  {:>6}  {:>6}  {:>6}",
        "task", "trials", "mean", "errors"
    );
    for row in &rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>6.3}  {:>6}",
            row.task, row.trials, row.mean, row.errors
        );
    }
    let rewards: Vec<Option<f64>> = results.iter().map(|r| r.reward()).collect();
    let mut per_task: BTreeMap<&str, Vec<Option<f64>>> = BTreeMap::new();
    for r in results {
        per_task
            .entry(r.task_name.as_str())
            .or_default()
            .push(r.reward());
    }
    let errors = results
        .iter()
        .filter(|r| r.exception_info.is_some())
        .count();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "trials: {}  errors: {errors}  mean: {:.3}",
        results.len(),
        metrics::mean(&rewards)
    );
    let pass = metrics::pass_at_k(per_task.values().map(Vec::as_slice));
    if !pass.is_empty() {
        let text: Vec<String> = pass
            .iter()
            .map(|(k, v)| format!("pass@{k} {v:.3}"))
            .collect();
        let _ = writeln!(out, "{}", text.join("  "));
    }
    let mut exceptions: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results {
        if let Some(e) = &r.exception_info {
            *exceptions.entry(e.exception_type.as_str()).or_default() += 1;
        }
    }
    for (kind, count) in exceptions {
        let _ = writeln!(out, "  {kind}: {count}");
    }
    let _ = write!(out, "job: {}", job_dir.display());
    out
}
