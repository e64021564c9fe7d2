//! `index.html`: for every job its summary (every reward key with its interval, pass@k), the
//! per-task table and the list of trials, each linking to its page.

use maud::{Markup, html};
use stats::Interval;

use super::{JobPages, Links, page, task_anchor};
use crate::load::Trial;
use crate::summary::JobSummary;

/// `0.600`, the precision every figure is shown with.
pub(crate) fn num(x: f64) -> String {
    format!("{x:.3}")
}

pub(crate) fn interval(ci: Option<&Interval>) -> String {
    ci.map(|ci| format!("{}–{}", num(ci.low), num(ci.high)))
        .unwrap_or_else(|| "—".into())
}

/// `1h 02m`, `3m 05s`, `12.5s`.
pub(crate) fn duration(seconds: Option<f64>) -> String {
    let Some(s) = seconds else {
        return "—".into();
    };
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let total = s.round() as u64;
    let (h, m, sec) = (total / 3600, total / 60 % 60, total % 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else {
        format!("{m}m {sec:02}s")
    }
}

/// The CSS class and word for a trial's outcome.
pub(crate) fn outcome(trial: &Trial) -> (&'static str, String) {
    match (trial.finished, &trial.exception, trial.reward()) {
        (false, _, _) => ("unfinished", "unfinished".into()),
        (_, Some(e), _) => ("errored", e.kind.clone()),
        (_, None, Some(r)) if r > 0.0 => ("passed", format!("reward {}", num(r))),
        (_, None, Some(r)) => ("failed", format!("reward {}", num(r))),
        (_, None, None) => ("failed", "no reward".into()),
    }
}

fn cards(s: &JobSummary) -> Markup {
    html! {
        div.cards {
            div.card { span.label { "trials" } span.value { (s.n_finished) "/" (s.n_trials) }
                @if s.n_unfinished > 0 { span.note { (s.n_unfinished) " unfinished" } } }
            div.card { span.label { "tasks" } span.value { (s.n_tasks) } }
            div.card { span.label { "errored" } span.value { (s.n_errored) } }
            div.card.main-mean {
                span.label { "mean reward" } span.value { (num(s.main.mean.value)) }
                span.note { "95% CI " (interval(s.main.mean.ci.as_ref())) }
            }
            @for p in &s.main.pass_at_k {
                div.card { span.label { "pass@" (p.k) } span.value { (num(p.value)) }
                    span.note { "95% CI " (interval(p.ci.as_ref())) } }
            }
            @if let Some(cost) = s.usage.cost_usd {
                div.card { span.label { "cost" } span.value { "$" (format!("{cost:.2}")) } }
            }
            @if let Some(tokens) = s.usage.input_tokens {
                div.card { span.label { "tokens in / out" }
                    span.value { (tokens) " / " (s.usage.output_tokens.map_or("?".into(), |t| t.to_string())) } }
            }
        }
    }
}

fn rewards_table(s: &JobSummary) -> Markup {
    html! {
        table.rewards {
            thead { tr { th { "reward key" } th.n { "mean" } th.n { "95% CI" } th.n { "clustered stderr" } th { "pass@k (95% CI)" } } }
            tbody {
                @for r in &s.rewards {
                    tr.reward-row data-key=(r.key) {
                        td { code { (r.key) } }
                        td.n { (num(r.stats.mean.value)) }
                        td.n { (interval(r.stats.mean.ci.as_ref())) }
                        td.n { (r.stats.mean.stderr_clustered.map_or("—".into(), num)) }
                        td {
                            @for p in &r.stats.pass_at_k {
                                span.pk { "pass@" (p.k) " " (num(p.value)) " (" (interval(p.ci.as_ref())) ")" }
                            }
                        }
                    }
                }
                @if s.rewards.is_empty() {
                    tr { td colspan="5" { "no trial recorded rewards" } }
                }
            }
        }
    }
}

fn tasks_table(jp: &JobPages) -> Markup {
    let s = &jp.summary;
    let ks: Vec<u64> = s.main.pass_at_k.iter().map(|p| p.k).collect();
    let extra_keys: Vec<&str> = if s.rewards.len() > 1 {
        s.rewards.iter().map(|r| r.key.as_str()).collect()
    } else {
        Vec::new()
    };
    html! {
        table.tasks {
            thead { tr {
                th { "task" } th.n { "trials" } th.n { "errors" } th.n { "mean" } th.n { "95% CI" }
                @for k in &ks { th.n { "pass@" (k) } }
                @for key in &extra_keys { th.n { code { (key) } } }
                th { "trials" }
            } }
            tbody {
                @for t in &s.tasks {
                    tr.task-row id=(task_anchor(jp.number, &t.task)) data-task=(t.task) {
                        td { (t.task) }
                        td.n { (t.trials) }
                        td.n { (t.errors) }
                        td.n { (num(t.mean)) }
                        td.n { (interval(t.mean_ci.as_ref())) }
                        @for k in &ks { td.n { (t.pass_at_k.get(k).map_or("—".into(), |v| num(*v))) } }
                        @for key in &extra_keys { td.n { (t.rewards.get(*key).map_or("—".into(), |v| num(*v))) } }
                        td.dots {
                            @for (trial, (file, _)) in jp.job.trials.iter().zip(&jp.pages) {
                                @if trial.task == t.task && trial.finished {
                                    @let (class, word) = outcome(trial);
                                    a class={ "dot " (class) } href={ (jp.folder) "/" (file) } title={ (trial.name) ": " (word) } { "●" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn trials_table(jp: &JobPages) -> Markup {
    html! {
        table.trials {
            thead { tr { th { "trial" } th { "task" } th { "rewards" } th { "outcome" } th.n { "duration" } th.n { "steps" } th.n { "tokens in/out" } } }
            tbody {
                @for (trial, (file, steps)) in jp.job.trials.iter().zip(&jp.pages) {
                    @let (class, word) = outcome(trial);
                    tr class={ "trial-row " (class) } data-trial=(trial.name) {
                        td { a href={ (jp.folder) "/" (file) } { (trial.name) } }
                        td { (trial.task) }
                        td { @for (key, value) in &trial.rewards { span.kv { code { (key) } "=" (num(*value)) } " " } }
                        td { span class={ "badge " (class) } { (word) } }
                        td.n { (duration(trial.seconds)) }
                        td.n { (steps.map_or("—".into(), |n| n.to_string())) }
                        td.n { (trial.usage.input_tokens.map_or("—".into(), |t| t.to_string())) " / " (trial.usage.output_tokens.map_or("—".into(), |t| t.to_string())) }
                    }
                }
            }
        }
    }
}

fn job_section(jp: &JobPages, links: &Links) -> Markup {
    let s = &jp.summary;
    html! {
        section.job id={ "job-" (jp.number) } data-job=(s.job_name) {
            h2 { (s.job_name) }
            p.subtitle { (s.title.text()) }
            p.path { "job dir: " a href=(links.to_file(&jp.job.dir)) { code { (s.job_dir) } } }
            (cards(s))
            h3 { "Rewards" }
            (rewards_table(s))
            h3 { "Tasks" }
            (tasks_table(jp))
            h3 { "Trials" }
            (trials_table(jp))
            @if !s.problems.is_empty() {
                h3 { "Problems reading the job" }
                ul.problems { @for p in &s.problems { li { (p) } } }
            }
            p.note {
                "Intervals: 95%, " (s.main.interval_method) " (" (s.main.resampling.resamples)
                " resamples, seed " (s.main.resampling.seed) "): tasks are resampled with all their trials, "
                "since trials of one task are not independent. Per task: Wilson score interval over its trials."
                @if s.n_tasks < 2 { " With one task there is no between-task interval." }
                @else if s.n_tasks < stats::FEW_TASKS { " With only " (s.n_tasks) " tasks the interval is too narrow; read it as a rough guide." }
            }
        }
    }
}

/// The index page of all jobs.
pub(crate) fn render(jobs: &[JobPages], links: &Links) -> Markup {
    let title = if jobs.len() == 1 {
        format!(
            "{} — {}",
            jobs[0].summary.job_name,
            jobs[0].summary.title.text()
        )
    } else {
        format!("{} jobs", jobs.len())
    };
    let body = html! {
        h1 { (title) }
        @if jobs.len() > 1 {
            table.jobs {
                thead { tr { th { "job" } th { "dataset · agent · model" } th.n { "trials" } th.n { "tasks" } th.n { "errored" } th.n { "mean" } th.n { "95% CI" } } }
                tbody {
                    @for (n, jp) in jobs.iter().enumerate() {
                        @let s = &jp.summary;
                        tr.job-row {
                            td { a href={ "#job-" (n + 1) } { (s.job_name) } }
                            td { (s.title.text()) }
                            td.n { (s.n_finished) }
                            td.n { (s.n_tasks) }
                            td.n { (s.n_errored) }
                            td.n { (num(s.main.mean.value)) }
                            td.n { (interval(s.main.mean.ci.as_ref())) }
                        }
                    }
                }
            }
        }
        @for jp in jobs {
            (job_section(jp, links))
        }
    };
    page(&title, &[], body)
}
