//! Plain-text renderings of a [`JobSummary`] and a [`JobComparison`] for the terminal.

use std::fmt::Write as _;

use stats::{Interval, PairedOutcome, TaskSetStats};

use crate::compare::JobComparison;
use crate::summary::JobSummary;

fn ci(ci: Option<&Interval>) -> String {
    match ci {
        Some(ci) => format!("{:.3}–{:.3}", ci.low, ci.high),
        None => "—".into(),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Columns two spaces apart: the first and the text columns in `left` left-aligned, the
/// others (numbers) right-aligned.
fn table(rows: &[Vec<String>], left: &[usize]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 || left.contains(&c) {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

fn intervals_note(stats: &TaskSetStats, n_tasks: usize) -> String {
    let r = &stats.resampling;
    let caveat = if n_tasks < 2 {
        " (none here: they need at least two tasks)".to_owned()
    } else if n_tasks < stats::FEW_TASKS {
        format!(" (only {n_tasks} tasks: too few for a reliable interval)")
    } else {
        String::new()
    };
    format!(
        "intervals: 95%, {}, {} resamples, seed {}; per task: Wilson{caveat}",
        stats.interval_method, r.resamples, r.seed
    )
}

/// The end-of-run summary as text.
pub fn summary_text(s: &JobSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", s.title.text());
    let mut counts = format!(
        "job {}: {} of {}, {} with an exception",
        s.job_name,
        plural(s.n_finished, "trial", "trials"),
        plural(s.n_tasks, "task", "tasks"),
        s.n_errored
    );
    if s.n_unfinished > 0 {
        let _ = write!(counts, ", {} unfinished (not counted)", s.n_unfinished);
    }
    let _ = writeln!(out, "{counts}\n");

    let ks: Vec<u64> = s.main.pass_at_k.iter().map(|p| p.k).collect();
    let mut header: Vec<String> = ["task", "trials", "exceptions", "mean", "95% CI"]
        .map(String::from)
        .to_vec();
    header.extend(ks.iter().map(|k| format!("pass@{k}")));
    let mut rows = vec![header];
    for t in &s.tasks {
        let mut row = vec![
            t.task.clone(),
            t.trials.to_string(),
            t.errors.to_string(),
            format!("{:.3}", t.mean),
            ci(t.mean_ci.as_ref()),
        ];
        row.extend(ks.iter().map(|k| format!("{:.3}", t.pass_at_k[k])));
        rows.push(row);
    }
    out.push_str(&table(&rows, &[]));
    out.push('\n');

    let mut rows = vec![
        ["reward", "mean", "95% CI", "stderr"]
            .map(String::from)
            .to_vec(),
    ];
    for r in &s.rewards {
        rows.push(vec![
            r.key.clone(),
            format!("{:.3}", r.stats.mean.value),
            ci(r.stats.mean.ci.as_ref()),
            r.stats
                .mean
                .stderr_clustered
                .map(|e| format!("{e:.3}"))
                .unwrap_or_else(|| "—".into()),
        ]);
    }
    if s.rewards.is_empty() {
        rows.push(vec![
            "(no rewards)".into(),
            format!("{:.3}", s.main.mean.value),
            "—".into(),
            "—".into(),
        ]);
    }
    out.push_str(&table(&rows, &[]));
    if !s.main.pass_at_k.is_empty() {
        let parts: Vec<String> = s
            .main
            .pass_at_k
            .iter()
            .map(|p| format!("pass@{} {:.3} ({})", p.k, p.value, ci(p.ci.as_ref())))
            .collect();
        let _ = writeln!(out, "{}", parts.join("  "));
    }
    if !s.errors_by_type.is_empty() {
        let parts: Vec<String> = s
            .errors_by_type
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(out, "exceptions: {}", parts.join(", "));
    }
    let u = &s.usage;
    if u.input_tokens.is_some() || u.output_tokens.is_some() || u.cost_usd.is_some() {
        let n = |v: Option<u64>| v.map_or("?".to_owned(), |v| v.to_string());
        let mut line = format!(
            "tokens: {} in ({} cached), {} out",
            n(u.input_tokens),
            n(u.cache_tokens),
            n(u.output_tokens)
        );
        if let Some(cost) = u.cost_usd {
            let _ = write!(line, "; cost ${cost:.4}");
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "{}", intervals_note(&s.main, s.n_tasks));
    for problem in &s.problems {
        let _ = writeln!(out, "warning: {problem}");
    }
    out
}

/// A comparison of two jobs as text.
pub fn comparison_text(c: &JobComparison) -> String {
    let mut out = String::new();
    let s = &c.stats;
    let _ = writeln!(out, "A: {} — {}", c.a.job_name, c.a.title.text());
    let _ = writeln!(out, "B: {} — {}", c.b.job_name, c.b.title.text());
    let _ = writeln!(
        out,
        "{} paired by task; {} only in A and {} only in B are left out\n",
        plural(s.paired_tasks, "task", "tasks"),
        s.only_in_a.len(),
        s.only_in_b.len()
    );
    let mut rows = vec![["task", "A", "B", "B − A", ""].map(String::from).to_vec()];
    for t in &s.tasks {
        let mark = match t.outcome {
            PairedOutcome::ABetter => "A better",
            PairedOutcome::BBetter => "B better",
            PairedOutcome::Tie => "tie",
        };
        let flip = match (t.solved_a, t.solved_b) {
            (true, false) => ", solved only by A",
            (false, true) => ", solved only by B",
            _ => "",
        };
        rows.push(vec![
            t.task.clone(),
            format!("{:.3}", t.mean_a),
            format!("{:.3}", t.mean_b),
            format!("{:+.3}", t.mean_b - t.mean_a),
            format!("{mark}{flip}"),
        ]);
    }
    out.push_str(&table(&rows, &[4]));
    let _ = writeln!(
        out,
        "\nmean A {:.3}, B {:.3}; difference B − A {:+.3}, 95% CI {}",
        s.mean_a,
        s.mean_b,
        s.difference,
        s.ci.map_or("—".into(), |ci| format!(
            "[{:+.3}, {:+.3}]",
            ci.low, ci.high
        ))
    );
    if let Some(test) = &s.test {
        let how = if test.exact {
            format!("exact over {} sign patterns", test.patterns)
        } else {
            format!(
                "{} random sign patterns, seed {}",
                test.patterns, s.resampling.seed
            )
        };
        let _ = writeln!(
            out,
            "paired test: p = {:.4} ({}; {how})",
            test.p_value, test.method
        );
    }
    let _ = writeln!(
        out,
        "tasks: B better {}, A better {}, ties {}",
        s.b_better, s.a_better, s.ties
    );
    let list = |names: &[String]| {
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    };
    let _ = writeln!(out, "solved only by A: {}", list(&s.solved_only_by_a));
    let _ = writeln!(out, "solved only by B: {}", list(&s.solved_only_by_b));
    if !s.only_in_a.is_empty() {
        let _ = writeln!(out, "only in A: {}", list(&s.only_in_a));
    }
    if !s.only_in_b.is_empty() {
        let _ = writeln!(out, "only in B: {}", list(&s.only_in_b));
    }
    let _ = writeln!(
        out,
        "interval: {}, {} resamples, seed {}",
        s.interval_method, s.resampling.resamples, s.resampling.seed
    );
    out
}
