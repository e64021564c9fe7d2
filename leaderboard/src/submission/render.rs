//! Rendering a report: readable text, and GitHub workflow annotations plus a Markdown summary.

use std::fmt::Write as _;

use super::report::{Interval, Report, RuleOutcome, Status, VerdictSummary, Violation};
use super::rule::Verdict;

/// Items listed per rule in text and annotations; the JSON report lists every item.
const MAX_LISTED: usize = 20;

fn location(v: &Violation) -> String {
    match (&v.file, v.line) {
        (Some(f), Some(l)) => format!("{f}:{l}: "),
        (Some(f), None) => format!("{f}: "),
        _ => String::new(),
    }
}

fn percent(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// `{before}95% CI a–b{after}` in `unit`, or nothing without an interval.
fn ci_text(ci: Option<&Interval>, unit: fn(f64) -> String, before: &str, after: &str) -> String {
    ci.map(|ci| format!("{before}95% CI {}–{}{after}", unit(ci.low), unit(ci.high)))
        .unwrap_or_default()
}

fn plain(x: f64) -> String {
    format!("{x:.4}")
}

fn figures_lines(report: &Report) -> Vec<String> {
    let f = &report.figures;
    let mut lines = vec![format!(
        "leaderboard accuracy {} — {} of {} planned trials succeeded; errored and missing trials count as 0",
        percent(f.leaderboard_accuracy),
        f.n_successes,
        f.n_planned_trials
    )];
    let stderr = f
        .accuracy_stderr
        .map(|s| format!(" ± {} (stderr)", percent(s)))
        .unwrap_or_default();
    lines.push(format!(
        "accuracy {}{stderr}{} — {} of {} trials succeeded; errored trials count as 0",
        percent(f.accuracy),
        ci_text(f.accuracy_ci.as_ref(), percent, ", ", ""),
        f.n_successes,
        f.n_trials
    ));
    lines.push(format!(
        "mean reward {}{}",
        plain(f.mean_reward),
        ci_text(f.mean_reward_ci.as_ref(), plain, ", ", "")
    ));
    if f.pass_at_k.is_empty() {
        lines.push("pass@k: not defined (rewards are not all 0/1, or too few trials)".into());
    } else {
        let mut ks: Vec<(u64, &str, f64)> = f
            .pass_at_k
            .iter()
            .map(|(k, v)| (k.parse().unwrap_or(0), k.as_str(), *v))
            .collect();
        ks.sort_by_key(|(k, _, _)| *k);
        let parts: Vec<String> = ks
            .iter()
            .map(|(k, key, v)| {
                format!(
                    "pass@{k} {}{}",
                    percent(*v),
                    ci_text(f.pass_at_k_ci.get(*key), percent, " (", ")")
                )
            })
            .collect();
        lines.push(parts.join(", "));
    }
    if f.accuracy_ci.is_some() {
        let caveat = if f.n_tasks < stats::FEW_TASKS {
            format!(
                " (only {} tasks: a bootstrap over so few is too narrow; read it as a rough guide)",
                f.n_tasks
            )
        } else {
            String::new()
        };
        lines.push(format!(
            "intervals: {:.0}%, {}, {} resamples, seed {}{caveat}",
            f.interval.level * 100.0,
            f.interval.method,
            f.interval.resamples,
            f.interval.seed
        ));
    } else {
        lines.push("intervals: none (they need at least two tasks)".into());
    }
    let counts: Vec<usize> = f.trials_per_task.values().copied().collect();
    match (counts.iter().min(), counts.iter().max()) {
        (Some(min), Some(max)) => lines.push(format!(
            "trials per task: min {min}, max {max} over {} tasks",
            counts.len()
        )),
        _ => lines.push("trials per task: no tasks".into()),
    }
    for job in &f.models_called {
        lines.push(format!(
            "models called: {} ({}: {} metered trial(s); declared {})",
            if job.called.is_empty() {
                "none".to_owned()
            } else {
                job.called.join(", ")
            },
            job.job,
            job.n_metered_trials,
            if job.declared.is_empty() {
                "none".to_owned()
            } else {
                job.declared.join(", ")
            }
        ));
    }
    if f.errored_by_exception_type.is_empty() {
        lines.push("errored trials: none".into());
    } else {
        let parts: Vec<String> = f
            .errored_by_exception_type
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        lines.push(format!(
            "errored trials: {} ({})",
            f.n_errored,
            parts.join(", ")
        ));
    }
    lines
}

fn status_word(rule: &RuleOutcome) -> &'static str {
    match rule.status {
        Status::Passed => "PASS",
        Status::Failed => "FAIL",
        Status::Skipped => "SKIP",
        Status::NotRecorded => "N/R",
    }
}

/// The heading of a verdict's rules, saying whether it decides the exit code.
fn verdict_heading(report: &Report, verdict: Verdict) -> &'static str {
    match (verdict, report.require_evidence) {
        (Verdict::Leaderboard, _) => {
            "Leaderboard (the rules the leaderboard applies, and anti-gaming checks; decides the exit code):"
        }
        (Verdict::Evidence, true) => {
            "Evidence (runner's own records; decides the exit code too: --require-evidence):"
        }
        (Verdict::Evidence, false) => {
            "Evidence (runner's own records; shown, deciding only with --require-evidence):"
        }
    }
}

/// One verdict in a line: VALID, INVALID with the rules failed, or NOT RECORDED with them.
fn verdict_line(summary: &VerdictSummary) -> String {
    let mut parts = Vec::new();
    if !summary.failed.is_empty() {
        parts.push(format!(
            "INVALID ({} rule(s) failed: {})",
            summary.failed.len(),
            summary.failed.join(", ")
        ));
    }
    if !summary.not_recorded.is_empty() {
        parts.push(format!(
            "NOT RECORDED ({})",
            summary.not_recorded.join(", ")
        ));
    }
    if parts.is_empty() {
        "VALID".into()
    } else {
        parts.join("; ")
    }
}

/// The readable text report.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let f = &report.figures;
    let _ = writeln!(
        out,
        "Submission: {} job dir(s), {} trials, {} tasks",
        f.n_jobs, f.n_trials, f.n_tasks
    );
    for verdict in [Verdict::Leaderboard, Verdict::Evidence] {
        let _ = writeln!(out, "{}", verdict_heading(report, verdict));
        for rule in report.rules.iter().filter(|r| r.verdict == verdict) {
            rule_text(&mut out, rule);
        }
    }
    let _ = writeln!(out, "Figures:");
    for line in figures_lines(report) {
        let _ = writeln!(out, "  {line}");
    }
    let v = &report.verdicts;
    let _ = writeln!(out, "Leaderboard: {}", verdict_line(&v.leaderboard));
    let _ = writeln!(out, "Evidence: {}", verdict_line(&v.evidence));
    let deciding = report.deciding_failures();
    if deciding.is_empty() {
        let _ = writeln!(out, "Result: VALID");
    } else {
        let _ = writeln!(
            out,
            "Result: INVALID ({} rule(s) failed: {})",
            deciding.len(),
            deciding.join(", ")
        );
    }
    out
}

fn rule_text(out: &mut String, rule: &RuleOutcome) {
    let detail = match rule.status {
        Status::Skipped => format!("skipped: {}", rule.skipped_because.unwrap_or("")),
        Status::Failed => format!("{} problem(s): {}", rule.violations.len(), rule.description),
        Status::NotRecorded => format!("not recorded: {}", rule.description),
        Status::Passed => rule.description.to_owned(),
    };
    let _ = writeln!(out, "{:<4} {:<30} {detail}", status_word(rule), rule.rule);
    for v in rule.violations.iter().take(MAX_LISTED) {
        let _ = writeln!(out, "     {}{}", location(v), v.message);
    }
    if rule.violations.len() > MAX_LISTED {
        let _ = writeln!(
            out,
            "     … and {} more (see --format json)",
            rule.violations.len() - MAX_LISTED
        );
    }
}

/// Escapes a workflow-command message (`%`, CR, LF).
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow-command property value (also `:` and `,`).
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// Workflow commands, one per listed violation: `::error` where it decides the verdict asked
/// for, `::warning` for a failed evidence rule that does not, `::notice` for evidence not
/// recorded.
pub fn annotations(report: &Report) -> String {
    let mut out = String::new();
    for rule in report
        .rules
        .iter()
        .filter(|r| matches!(r.status, Status::Failed | Status::NotRecorded))
    {
        let deciding = rule.verdict == Verdict::Leaderboard || report.require_evidence;
        let level = match (rule.status, deciding) {
            (_, true) => "error",
            (Status::Failed, false) => "warning",
            _ => "notice",
        };
        for v in rule.violations.iter().take(MAX_LISTED) {
            let mut props = Vec::new();
            if let Some(file) = &v.file {
                props.push(format!("file={}", escape_property(file)));
            }
            if let Some(line) = v.line {
                props.push(format!("line={line}"));
            }
            props.push(format!("title={}", escape_property(rule.rule)));
            let _ = writeln!(
                out,
                "::{level} {}::{}",
                props.join(","),
                escape_data(&v.message)
            );
        }
        if rule.violations.len() > MAX_LISTED {
            let _ = writeln!(
                out,
                "::{level} title={}::{}",
                escape_property(rule.rule),
                escape_data(&format!(
                    "… and {} more violations of this rule",
                    rule.violations.len() - MAX_LISTED
                ))
            );
        }
    }
    out
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown summary for the workflow's job summary page.
pub fn markdown(report: &Report) -> String {
    let mut out = String::new();
    let verdict = if report.valid {
        "✅ valid"
    } else {
        "❌ invalid"
    };
    let _ = writeln!(out, "## Leaderboard preflight: {verdict}\n");
    let v = &report.verdicts;
    let decides = if report.require_evidence {
        "decides (--require-evidence)"
    } else {
        "shown, not deciding"
    };
    let _ = writeln!(
        out,
        "- Leaderboard verdict (decides): {}\n- Evidence verdict ({decides}): {}\n",
        verdict_line(&v.leaderboard),
        verdict_line(&v.evidence)
    );
    let _ = writeln!(
        out,
        "Job dirs: {}\n",
        report
            .jobs
            .iter()
            .map(|j| format!("`{j}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        out,
        "| Rule | Verdict | Status | Problems |\n|---|---|---|---|"
    );
    for rule in &report.rules {
        let status = match rule.status {
            Status::Passed => "✅ pass",
            Status::Failed => "❌ fail",
            Status::Skipped => "⏭ skipped",
            Status::NotRecorded => "➖ not recorded",
        };
        let verdict = match rule.verdict {
            Verdict::Leaderboard => "leaderboard",
            Verdict::Evidence => "evidence",
        };
        let _ = writeln!(
            out,
            "| `{}` | {verdict} | {status} | {} |",
            rule.rule,
            rule.violations.len()
        );
    }
    let failed: Vec<&RuleOutcome> = report
        .rules
        .iter()
        .filter(|r| matches!(r.status, Status::Failed | Status::NotRecorded))
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n### Problems\n");
        for rule in failed {
            let _ = writeln!(out, "**`{}`** — {}\n", rule.rule, rule.description);
            for v in rule.violations.iter().take(MAX_LISTED) {
                let _ = writeln!(out, "- {}{}", md_cell(&location(v)), md_cell(&v.message));
            }
            if rule.violations.len() > MAX_LISTED {
                let _ = writeln!(out, "- … and {} more", rule.violations.len() - MAX_LISTED);
            }
            out.push('\n');
        }
    }
    let _ = writeln!(out, "\n### Figures\n");
    for line in figures_lines(report) {
        let _ = writeln!(out, "- {line}");
    }
    out
}

#[cfg(test)]
mod tests {
    //! Snapshots of the three report formats over a two-job submission (two tasks, so the
    //! intervals are defined) with an incomplete flow-style metadata.yaml.

    use std::path::Path;

    use super::*;
    use crate::submission::{Options, validate};

    fn report() -> Report {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut options = Options::new(vec![
            fixtures.join("harbor-h13/2026-06-10__12-00-00"),
            fixtures.join("harbor-h144/tbench-2.0-k5-v01"),
        ]);
        options.metadata = Some(fixtures.join("metadata-incomplete.yaml"));
        validate(&options).unwrap()
    }

    fn settings() -> insta::Settings {
        let mut settings = insta::Settings::clone_current();
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        settings.add_filter(&regex::escape(fixtures), "[fixtures]");
        settings
    }

    #[test]
    fn text_report() {
        settings().bind(|| insta::assert_snapshot!(text(&report())));
    }

    #[test]
    fn json_report() {
        let json = serde_json::to_string_pretty(&report()).unwrap();
        settings().bind(|| insta::assert_snapshot!(json));
    }

    #[test]
    fn github_report() {
        let report = report();
        let out = format!(
            "{}\n--- summary ---\n{}",
            annotations(&report),
            markdown(&report)
        );
        settings().bind(|| insta::assert_snapshot!(out));
    }

    #[test]
    fn the_report_shows_the_intervals() {
        let report = report();
        let f = &report.figures;
        assert_eq!(f.n_tasks, 2);
        let ci = f.accuracy_ci.unwrap();
        assert!(ci.low <= f.accuracy && f.accuracy <= ci.high, "{ci:?}");
        assert_eq!(
            f.pass_at_k_ci.keys().collect::<Vec<_>>(),
            f.pass_at_k.keys().collect::<Vec<_>>()
        );
        assert!(text(&report).contains("(95% CI "));
    }
}
