//! The end-of-job summary: per task trials, mean reward and trials with an exception; overall mean and pass@k;
//! coverage (scored / planned) by outcome; the failed trials by name with their exception;
//! trials not run; skipped tasks (repeated here, not only at the top); and the wall time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use tasks::exception::first_line;
use tasks::records::TrialTotals;
use tasks::{TrialOutcome, metrics};

/// At most this many trials are listed per kind of failure (the rest are counted; job.log and
/// the records have them all).
const MAX_LISTED: usize = 30;

/// One row of the summary table.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// Task name.
    pub task: String,
    /// Trials recorded for the task.
    pub trials: usize,
    /// Mean reward, errored trials counting 0.
    pub mean: f64,
    /// Trials that ended with an exception (a timeout, an agent or an infrastructure error).
    pub errors: usize,
}

/// What the summary is made of.
#[derive(Debug, Clone, Copy)]
pub struct SummaryInput<'a> {
    /// Every finished trial's totals (a resume's complete ones included).
    pub results: &'a [TrialTotals],
    /// Trials planned.
    pub planned: usize,
    /// Tasks skipped as malformed or unplannable, with why.
    pub skipped: &'a [String],
    /// The run's wall time.
    pub wall: Option<Duration>,
    /// The run was interrupted.
    pub interrupted: bool,
    /// The job directory.
    pub job_dir: &'a Path,
}

/// Rows per task, sorted by task name.
pub fn task_rows(results: &[TrialTotals]) -> Vec<TaskRow> {
    let mut by_task: BTreeMap<&str, Vec<&TrialTotals>> = BTreeMap::new();
    for r in results {
        by_task.entry(&r.task_name).or_default().push(r);
    }
    by_task
        .into_iter()
        .map(|(task, trials)| {
            let rewards: Vec<Option<f64>> = trials.iter().map(|t| t.reward()).collect();
            TaskRow {
                task: task.to_owned(),
                trials: trials.len(),
                mean: metrics::mean(&rewards),
                errors: trials.iter().filter(|t| t.exception.is_some()).count(),
            }
        })
        .collect()
}

/// The summary as text.
pub fn render_summary(input: &SummaryInput<'_>) -> String {
    let mut out = String::from("\n");
    write_task_table(&mut out, input.results);
    let _ = writeln!(out);
    write_overall(&mut out, input.results);
    write_coverage(&mut out, input);
    if !input.skipped.is_empty() {
        let _ = writeln!(out, "skipped tasks ({}):", input.skipped.len());
        for skipped in input.skipped {
            let _ = writeln!(out, "  {}", first_line(skipped));
        }
    }
    if let Some(wall) = input.wall {
        let _ = writeln!(out, "wall time: {}", clock(wall));
    }
    let _ = write!(out, "job: {}", input.job_dir.display());
    out
}

/// One line per task: its trials, mean reward and trials with an exception.
fn write_task_table(out: &mut String, results: &[TrialTotals]) {
    let rows = task_rows(results);
    let width = rows.iter().map(|r| r.task.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        out,
        "{:<width$}  {:>6}  {:>6}  {:>10}",
        "task", "trials", "mean", "exceptions"
    );
    for row in &rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>6.3}  {:>10}",
            row.task, row.trials, row.mean, row.errors
        );
    }
}

/// The overall line (trials, exceptions, mean with its interval), pass@k and the count of
/// each exception type.
fn write_overall(out: &mut String, results: &[TrialTotals]) {
    let rewards: Vec<Option<f64>> = results.iter().map(|r| r.reward()).collect();
    let mut per_task: BTreeMap<&str, Vec<Option<f64>>> = BTreeMap::new();
    for r in results {
        per_task.entry(&r.task_name).or_default().push(r.reward());
    }
    // "Exception", not "error": a timed-out trial is scored, and only the coverage line below
    // says which exceptions were agent or infrastructure errors.
    let errors = results.iter().filter(|r| r.exception.is_some()).count();
    let estimate = stats::summarize(
        per_task.values().map(Vec::as_slice),
        &stats::Resampling::default(),
    );
    let interval = estimate.mean.ci.map_or_else(String::new, |ci| {
        // docs/statistics.md: a cluster bootstrap over tasks.
        format!(" (95% CI {:.3}–{:.3}, clustered by task)", ci.low, ci.high)
    });
    let _ = writeln!(
        out,
        "trials: {}  with an exception: {errors}  mean: {:.3}{interval}",
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
        if let Some(e) = &r.exception {
            *exceptions.entry(e.exception_type.as_str()).or_default() += 1;
        }
    }
    for (kind, count) in exceptions {
        let _ = writeln!(out, "  {kind}: {count}");
    }
}

/// The coverage line, the failed trials by kind and the trials not run, each with the
/// command that runs them again.
fn write_coverage(out: &mut String, input: &SummaryInput<'_>) {
    let results = input.results;
    let coverage = engine::job::coverage(input.planned as u32, results);
    let _ = writeln!(
        out,
        "coverage: {}/{} scored ({:.3}); agent errors {}, infra errors {}, not run {}; retries {}",
        coverage.scored,
        coverage.planned,
        coverage.fraction,
        coverage.agent_error,
        coverage.infra_error,
        coverage.not_run,
        coverage.retries
    );
    list_failed(
        out,
        &format!(
            "infrastructure errors (no data; `runner jobs resume -p {} -f infra_error` runs them again)",
            input.job_dir.display()
        ),
        results,
        TrialOutcome::InfraError,
    );
    list_failed(
        out,
        "agent errors (counted as 0)",
        results,
        TrialOutcome::AgentError,
    );
    if coverage.not_run > 0 {
        let why = if input.interrupted {
            "interrupted before they finished"
        } else {
            "no final record"
        };
        let _ = writeln!(
            out,
            "not run: {} trial(s), {why}; `runner jobs resume -p {}` runs them",
            coverage.not_run,
            input.job_dir.display()
        );
    }
}

/// The summary as printed: with colour, the failure headings in red (no data) or yellow
/// (counted as 0, not run, skipped) and the overall line in bold. The text itself is the
/// same as [`render_summary`]'s, which job.log keeps.
pub fn colorize_summary(text: &str, color: bool) -> String {
    let style = || console::Style::new().force_styling(color);
    text.lines()
        .map(|line| {
            let styled = if line.starts_with("infrastructure errors") {
                style().red().bold().apply_to(line)
            } else if ["agent errors", "not run:", "skipped tasks"]
                .iter()
                .any(|p| line.starts_with(p))
            {
                style().yellow().bold().apply_to(line)
            } else if line.starts_with("trials: ") {
                style().bold().apply_to(line)
            } else {
                style().apply_to(line)
            };
            styled.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn list_failed(out: &mut String, heading: &str, results: &[TrialTotals], outcome: TrialOutcome) {
    let mut failed: Vec<&TrialTotals> = results.iter().filter(|r| r.outcome == outcome).collect();
    if failed.is_empty() {
        return;
    }
    failed.sort_by(|a, b| a.trial_name.cmp(&b.trial_name));
    let _ = writeln!(out, "{heading}:");
    for r in failed.iter().take(MAX_LISTED) {
        let exception = r.exception.as_ref().map_or_else(
            || "no exception and no reward".to_owned(),
            |e| format!("{}: {}", e.exception_type, e.first_line),
        );
        let attempts = match r.attempts {
            1 => String::new(),
            n => format!(" ({n} attempts)"),
        };
        let _ = writeln!(out, "  {}  {exception}{attempts}", r.trial_name);
    }
    if failed.len() > MAX_LISTED {
        let _ = writeln!(
            out,
            "  … and {} more (job.log lists every trial)",
            failed.len() - MAX_LISTED
        );
    }
}

/// `1h 02m 03s`, `4m 05s`, `6.2s`.
fn clock(wall: Duration) -> String {
    let secs = wall.as_secs();
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, _) => format!("{:.1}s", wall.as_secs_f64()),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, s) => format!("{h}h {m:02}m {s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tasks::records::TrialResult;
    use testkit::records::{trial_result, with_attempts};

    fn fixture() -> Vec<TrialTotals> {
        let records: Vec<TrialResult> = vec![
            trial_result("hello__A2b3C4d", "examples/hello", Some(1.0), None),
            trial_result("hello__E5f6G7h", "examples/hello", Some(1.0), None),
            trial_result(
                "slow__H8j9K2m",
                "examples/slow",
                Some(0.0),
                Some("AgentTimeoutError"),
            ),
            trial_result(
                "slow__N3p4Q5r",
                "examples/slow",
                None,
                Some("AgentSetupError"),
            ),
            with_attempts(
                trial_result(
                    "net__S6t7U8v",
                    "examples/net",
                    None,
                    Some("EnvironmentStartError"),
                ),
                3,
            ),
            with_attempts(
                trial_result("net__W9x2Y3z", "examples/net", Some(1.0), None),
                2,
            ),
        ];
        records.iter().map(TrialTotals::from).collect()
    }

    #[test]
    fn summary_of_a_job_with_every_outcome_and_an_interruption() {
        let results = fixture();
        let skipped =
            vec!["tasks/broken/task.toml: [agent] timeout_sec: must be positive".to_owned()];
        let text = render_summary(&SummaryInput {
            results: &results,
            planned: 8,
            skipped: &skipped,
            wall: Some(Duration::from_secs(3723)),
            interrupted: true,
            job_dir: Path::new("jobs/demo"),
        });
        insta::assert_snapshot!(text);
        // Colour changes the look, never the text.
        assert_eq!(colorize_summary(&text, false), text);
        let colored = colorize_summary(&text, true);
        assert_eq!(console::strip_ansi_codes(&colored), text);
        assert!(
            colored
                .lines()
                .any(|l| l.starts_with("\x1b[31m\x1b[1minfrastructure errors")),
            "{colored:?}"
        );
    }

    #[test]
    fn summary_of_a_clean_job_lists_no_failures() {
        let results = fixture()[..2].to_vec();
        let text = render_summary(&SummaryInput {
            results: &results,
            planned: 2,
            skipped: &[],
            wall: Some(Duration::from_millis(6200)),
            interrupted: false,
            job_dir: Path::new("jobs/clean"),
        });
        insta::assert_snapshot!(text);
    }

    #[test]
    fn wall_times_read_as_clocks() {
        assert_eq!(clock(Duration::from_millis(6200)), "6.2s");
        assert_eq!(clock(Duration::from_secs(245)), "4m 05s");
        assert_eq!(clock(Duration::from_secs(3723)), "1h 02m 03s");
    }
}
