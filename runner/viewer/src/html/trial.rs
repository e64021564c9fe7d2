//! One trial's page: facts and rewards, phase timings, exception, verifier checks and output,
//! the trajectory as a conversation, and trial.log; long logs are cut with a link to the file.

use maud::{Markup, html};

use super::index::{duration, interval, num, outcome};
use super::{JobPages, Links, page, task_anchor, trajectory};
use crate::files;
use crate::load::Trial;

/// The pages before and after this one in the job, for links.
pub(crate) struct Neighbours<'a> {
    pub previous: Option<&'a str>,
    pub next: Option<&'a str>,
}

/// A written trial page and its trajectory's step count.
pub(crate) struct Rendered {
    pub markup: Markup,
    pub steps: Option<usize>,
}

/// The start of a text file under the trial dir, with a link to all of it.
fn log(trial: &Trial, rel: &str, links: &Links) -> Markup {
    let Some(path) = files::regular_file(&trial.dir, rel) else {
        return html! { p.note { "No " (rel) "." } };
    };
    let href = links.to_file(&path);
    match files::read_head(&path, files::LOG_HEAD_BYTES) {
        Ok(head) => html! {
            div.log data-file=(rel) {
                p.note { a href=(href) { (rel) } " (" (head.total_bytes) " bytes)" }
                pre { (head.text) }
                @if head.truncated {
                    p.cut { "Showing the first " (files::LOG_HEAD_BYTES / 1024) " KiB of " (head.total_bytes)
                        " bytes; " a href=(href) { "open the whole file" } "." }
                }
            }
        },
        Err(e) => html! { p.note { "Cannot read " a href=(href) { (rel) } ": " (e.to_string()) } },
    }
}

fn phases(trial: &Trial) -> Markup {
    let total: f64 = trial.phases.iter().filter_map(|p| p.seconds).sum();
    html! {
        table.phases {
            thead { tr { th { "phase" } th { "started" } th { "finished" } th.n { "duration" } th.bar-cell { } } }
            tbody {
                @for p in &trial.phases {
                    tr.phase-row {
                        td { (p.name) }
                        td { (p.started_at.as_deref().unwrap_or("—")) }
                        td { (p.finished_at.as_deref().unwrap_or("—")) }
                        td.n { (duration(p.seconds)) }
                        td.bar-cell {
                            @if let Some(s) = p.seconds.filter(|_| total > 0.0) {
                                span.bar style={ "width:" (format!("{:.1}", (s / total * 100.0).clamp(0.0, 100.0))) "%" } {}
                            }
                        }
                    }
                }
            }
        }
    }
}

fn facts(jp: &JobPages, trial: &Trial) -> Markup {
    let u = &trial.usage;
    html! {
        dl.facts {
            dt { "task" } dd { (trial.task) }
            dt { "job" } dd { (jp.summary.job_name) }
            @if let Some(a) = &trial.agent { dt { "agent" } dd { (a) } }
            @if let Some(m) = &trial.model { dt { "model" } dd { (m) } }
            @if let Some(s) = &trial.source { dt { "dataset" } dd { (s) } }
            dt { "started" } dd { (trial.started_at.as_deref().unwrap_or("—")) }
            dt { "finished" } dd { (trial.finished_at.as_deref().unwrap_or("—")) }
            dt { "duration" } dd { (duration(trial.seconds)) }
            @if u.input_tokens.is_some() || u.output_tokens.is_some() {
                dt { "tokens" } dd { (u.input_tokens.map_or("?".into(), |t| t.to_string())) " in ("
                    (u.cache_tokens.map_or("?".into(), |t| t.to_string())) " cached), "
                    (u.output_tokens.map_or("?".into(), |t| t.to_string())) " out" }
            }
            @if let Some(cost) = u.cost_usd { dt { "cost" } dd { "$" (format!("{cost:.4}")) } }
        }
    }
}

fn task_mean(jp: &JobPages, trial: &Trial) -> Markup {
    match jp.summary.tasks.iter().find(|t| t.task == trial.task) {
        Some(t) => html! {
            p.note { a href={ "../index.html#" (task_anchor(jp.number, &t.task)) } { "Task " (t.task) } " in this job: "
                (t.trials) " trials, mean " (num(t.mean)) " (95% CI " (interval(t.mean_ci.as_ref())) ")" }
        },
        None => html! {},
    }
}

/// Renders the page of `trial` of the job `jp`; `links` are relative to the job's folder.
pub(crate) fn render(
    jp: &JobPages,
    trial: &Trial,
    links: &Links,
    neighbours: &Neighbours,
) -> Rendered {
    let (class, word) = outcome(trial);
    let trajectory = trajectory::render(&trial.dir, links);
    let body = html! {
        h1 { (trial.name) " " span class={ "badge " (class) } { (word) } }
        nav.pager {
            @if let Some(p) = neighbours.previous { a.prev href=(p) { "← previous trial" } }
            a href={ "../index.html#job-" (jp.number) } { "all trials" }
            @if let Some(n) = neighbours.next { a.next href=(n) { "next trial →" } }
            a href=(links.to_file(&trial.dir)) { "trial dir" }
        }
        (facts(jp, trial))
        (task_mean(jp, trial))
        h2 { "Rewards" }
        @if trial.rewards.is_empty() {
            p.note { @if trial.finished { "No rewards recorded." } @else { "The trial has no result.json: it is running or was interrupted." } }
        } @else {
            table.rewards { tbody { @for (key, value) in &trial.rewards {
                tr.reward-row data-key=(key) { td { code { (key) } } td.n { (num(*value)) } }
            } } }
        }
        h2 { "Phases" }
        (phases(trial))
        @if let Some(e) = &trial.exception {
            h2 { "Exception" }
            div.exception {
                p { strong { (e.kind) } @if let Some(at) = &e.occurred_at { " at " (at) } }
                pre.message { (e.message) }
                @if !e.traceback.is_empty() { details { summary { "traceback" } pre { (e.traceback) } } }
            }
            (log(trial, "exception.txt", links))
        }
        h2 { "Verifier" }
        @if !trial.checks.is_empty() {
            table.checks {
                thead { tr { th { "check" } th { "status" } } }
                tbody { @for c in &trial.checks {
                    tr class={ "check-row " (if c.status == "passed" { "passed" } else if c.status == "skipped" { "skipped" } else { "failed" }) } {
                        td { (c.name) } td { (c.status) }
                    }
                } }
            }
        }
        @if !trial.toolchain_changes.is_empty() {
            div.toolchain {
                p { strong { "The agent changed the tests' programs or startup hooks" }
                    @if trial.toolchain.as_deref() == Some("agent") {
                        "; the tests ran with the agent's (--agent-toolchain):"
                    } @else { "; the tests ran with the image's own:" } }
                ul { @for change in &trial.toolchain_changes { li { code { (change) } } } }
            }
        }
        (log(trial, "verifier/test-stdout.txt", links))
        h2 { "Trajectory" }
        (trajectory.markup)
        h2 { "trial.log" }
        (log(trial, "trial.log", links))
        @if !trial.problems.is_empty() {
            h2 { "Problems reading the trial" }
            ul.problems { @for p in &trial.problems { li { (p) } } }
        }
    };
    let crumbs = [(
        "../index.html".to_owned(),
        format!("{} — all trials", jp.summary.job_name),
    )];
    Rendered {
        markup: page(&trial.name, &crumbs, body),
        steps: trajectory.steps,
    }
}
