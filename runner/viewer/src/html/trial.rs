//! One trial's page: facts and rewards, phase timings (relative to the trial's start),
//! exception, each step of a multi-step trial, verifier checks and output, the trajectory as a
//! conversation, and trial.log; long logs are cut with a link to the file.

use maud::{Markup, html};

use super::index::{duration, interval, num, outcome};
use super::{JobPages, Links, page, task_anchor, trajectory};
use crate::files;
use crate::load::{Exception, Phase, Trial, parse_time};

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

/// `at` as seconds after the trial's start (`+1.234 s`), which reads better than two
/// nanosecond timestamps; the recorded time stays in the cell's title. The recorded text when
/// either does not parse.
fn since_start(trial: &Trial, at: Option<&str>) -> Markup {
    let Some(at) = at else {
        return html! { "—" };
    };
    let start = trial.started_at.as_deref().and_then(parse_time);
    match (start, parse_time(at)) {
        (Some(start), Some(time)) => {
            let seconds = (time - start).num_milliseconds() as f64 / 1000.0;
            html! { span title=(at) { (format!("{seconds:+.3} s")) } }
        }
        _ => html! { (at) },
    }
}

fn phase_table(trial: &Trial, phases: &[&Phase]) -> Markup {
    let total: f64 = phases.iter().filter_map(|p| p.seconds).sum();
    html! {
        table.phases {
            thead { tr { th { "phase" } th { "started" } th { "finished" } th.n { "duration" } th.bar-cell { } } }
            tbody {
                @for p in phases {
                    tr.phase-row {
                        td { (p.name) }
                        td { (since_start(trial, p.started_at.as_deref())) }
                        td { (since_start(trial, p.finished_at.as_deref())) }
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

fn rewards_table(rewards: &[(String, f64)]) -> Markup {
    html! {
        table.rewards { tbody { @for (key, value) in rewards {
            tr.reward-row data-key=(key) { td { code { (key) } } td.n { (num(*value)) } }
        } } }
    }
}

fn exception_block(trial: &Trial, e: &Exception, links: &Links, file: &str) -> Markup {
    html! {
        div.exception {
            p { strong { (e.kind) } @if let Some(at) = &e.occurred_at { " at " (since_start(trial, Some(at))) } }
            pre.message { (e.message) }
            @if !e.traceback.is_empty() { details { summary { "traceback" } pre { (e.traceback) } } }
        }
        (log(trial, file, links))
    }
}

/// Each step of a multi-step trial: its instruction, rewards or failure, timings, verifier
/// output and trajectory, all from `steps/<name>/`.
fn steps(trial: &Trial, links: &Links) -> Markup {
    html! {
        @for step in &trial.steps {
            section.step-section data-step=(step.name) {
                h3 { "Step " code { (step.name) } }
                (log(trial, &format!("steps/{}/instruction.md", step.name), links))
                @if step.rewards.is_empty() {
                    p.note { "No rewards recorded for this step." }
                } @else {
                    (rewards_table(&step.rewards))
                }
                (phase_table(trial, &[&step.agent, &step.verifier]))
                @if let Some(e) = &step.exception {
                    (exception_block(trial, e, links, &format!("steps/{}/exception.txt", step.name)))
                }
                (log(trial, &format!("steps/{}/verifier/test-stdout.txt", step.name), links))
                @let step_dir = trial.dir.join("steps").join(&step.name);
                // An agent without a trajectory (the oracle) would repeat "No …" per step.
                @if files::regular_file(&step_dir, "agent/trajectory.json").is_some() {
                    (trajectory::render(&step_dir, links).markup)
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
            (rewards_table(&trial.rewards))
        }
        h2 { "Phases" }
        (phase_table(trial, &trial.phases.iter().collect::<Vec<_>>()))
        @if let Some(e) = &trial.exception {
            h2 { "Exception" }
            (exception_block(trial, e, links, "exception.txt"))
        }
        @if !trial.steps.is_empty() {
            h2 { "Steps" }
            (steps(trial, links))
        }
        @if !trial.network_attempts.is_empty() {
            h2 { "Network" }
            p.note { "Connection attempts through the egress proxy of the task's allowlist, by phase." }
            table.network {
                thead { tr { th { "phase" } th { "attempts" } th { "refused" } } }
                tbody { @for (phase, attempts, refused) in &trial.network_attempts {
                    tr { td { (phase) } td { (attempts) } td { (refused) } }
                } }
            }
            @for rel in ["agent/network.jsonl", "verifier/network.jsonl"] {
                @if files::regular_file(&trial.dir, rel).is_some() { (log(trial, rel, links)) }
            }
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
        @if trial.steps.is_empty() || files::regular_file(&trial.dir, "verifier/test-stdout.txt").is_some() {
            (log(trial, "verifier/test-stdout.txt", links))
        }
        @if trial.steps.is_empty() || trajectory.steps.is_some() {
            h2 { "Trajectory" }
            (trajectory.markup)
        }
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
