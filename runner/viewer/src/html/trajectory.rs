//! An ATIF trajectory (`agent/trajectory.json`, any version 1.0–1.7) as a conversation:
//! each step's source, message (text or content parts), reasoning, tool calls with their
//! arguments next to the observations that answered them, and token metrics. The file is
//! the agent's output: sizes are capped, and every string goes through maud's escaping.

use std::path::Path;

use maud::{Markup, html};
use serde_json::Value;

use super::Links;
use crate::files::{self, Json};

/// Characters shown per message, argument list or observation before a cut.
const FIELD_CHARS: usize = 20_000;
/// Characters shown per page over all fields; past it, fields are omitted.
const PAGE_CHARS: usize = 4_000_000;
/// Steps rendered per trajectory; the rest are counted.
const MAX_STEPS: usize = 2_000;
/// Embedded subagent trajectories are shown to this depth.
const MAX_DEPTH: usize = 2;

/// The text budget of one page.
struct Budget {
    left: usize,
}

impl Budget {
    /// `text` cut to the field and page limits, with how many characters were left out.
    fn take(&mut self, text: &str) -> (String, usize) {
        let limit = FIELD_CHARS.min(self.left);
        let total = text.chars().count();
        if total <= limit {
            self.left -= total;
            return (text.to_owned(), 0);
        }
        self.left -= limit;
        (text.chars().take(limit).collect(), total - limit)
    }
}

/// What the trajectory section holds, and how many top-level steps it had.
pub(crate) struct Rendered {
    pub markup: Markup,
    pub steps: Option<usize>,
}

struct Context<'a> {
    agent_dir: &'a Path,
    file_href: String,
    links: &'a Links,
    budget: Budget,
}

/// Renders `<trial>/agent/trajectory.json`.
pub(crate) fn render(trial_dir: &Path, links: &Links) -> Rendered {
    let rel = "agent/trajectory.json";
    let href = links.to_file(&trial_dir.join(rel));
    let note = |text: String| Rendered {
        markup: html! { p.note { (text) " " a href=(href) { (rel) } } },
        steps: None,
    };
    let value = match files::read_json(trial_dir, rel, files::MAX_TRAJECTORY_BYTES) {
        Json::Absent => {
            return Rendered {
                markup: html! { p.note { "No agent/trajectory.json." } },
                steps: None,
            };
        }
        Json::TooLarge(why) => {
            return note(format!("Too large to render here ({why}); open"));
        }
        Json::Invalid(e) => return note(format!("Cannot read the trajectory ({e}):")),
        Json::Value(v) => v,
    };
    let mut cx = Context {
        agent_dir: &trial_dir.join("agent"),
        file_href: href.clone(),
        links,
        budget: Budget { left: PAGE_CHARS },
    };
    let steps = value.get("steps").and_then(Value::as_array).map(Vec::len);
    let markup = html! {
        p.note { "From " a href=(href) { (rel) } "." }
        (trajectory(&value, &mut cx, 0))
    };
    Rendered { markup, steps }
}

fn str_of<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// A JSON scalar as text (`3`, `true`, `"x"` → `x`).
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn cut(text: &str, cx: &mut Context) -> Markup {
    let (shown, omitted) = cx.budget.take(text);
    html! {
        pre { (shown) }
        @if omitted > 0 {
            p.cut { "… " (omitted) " more characters; see " a href=(cx.file_href) { "trajectory.json" } }
        }
    }
}

/// A message or observation content: a string, or ATIF-v1.6 content parts.
fn content(value: &Value, cx: &mut Context) -> Markup {
    match value {
        Value::String(s) if s.is_empty() => html! { p.empty { "(empty)" } },
        Value::String(s) => cut(s, cx),
        Value::Array(parts) => html! {
            @for part in parts {
                @match str_of(part, "type") {
                    Some("image") => (image(part, cx)),
                    _ => (cut(str_of(part, "text").unwrap_or(""), cx)),
                }
            }
        },
        Value::Null => html! {},
        other => cut(&other.to_string(), cx),
    }
}

/// An image part: shown when its path is a regular file under the agent dir.
fn image(part: &Value, cx: &mut Context) -> Markup {
    let source = part.get("source").unwrap_or(&Value::Null);
    let path = str_of(source, "path").unwrap_or("");
    let media = str_of(source, "media_type").unwrap_or("image");
    match files::regular_file(cx.agent_dir, path) {
        Some(file) => {
            let href = cx.links.to_file(&file);
            html! { figure.image { img src=(href) alt=(path); figcaption { (media) " " (path) } } }
        }
        None => html! { p.note { "image " (path) " (" (media) "): not a file in the agent dir" } },
    }
}

fn metrics(m: &Value) -> Markup {
    let n = |key: &str| m.get(key).and_then(Value::as_u64);
    html! {
        span.metrics {
            @if let Some(p) = n("prompt_tokens") { span.m data-prompt-tokens=(p) { (p) " prompt" } }
            @if let Some(c) = n("cached_tokens") { span.m { (c) " cached" } }
            @if let Some(c) = n("completion_tokens") { span.m data-completion-tokens=(c) { (c) " completion" } }
            @if let Some(cost) = m.get("cost_usd").and_then(Value::as_f64) { span.m { "$" (format!("{cost:.4}")) } }
        }
    }
}

fn observation_result(result: &Value, cx: &mut Context) -> Markup {
    html! {
        div.observation {
            div.label { "observation"
                @if let Some(id) = str_of(result, "source_call_id") { " for " code { (id) } } }
            @if let Some(c) = result.get("content") { (content(c, cx)) }
            @if let Some(refs) = result.get("subagent_trajectory_ref").and_then(Value::as_array) {
                ul.subagents {
                    @for r in refs {
                        li { "subagent trajectory "
                            @if let Some(id) = str_of(r, "trajectory_id").or(str_of(r, "session_id")) { code { (id) } " " }
                            @if let Some(path) = str_of(r, "trajectory_path") {
                                @match files::regular_file(cx.agent_dir, path) {
                                    Some(file) => a href=(cx.links.to_file(&file)) { (path) },
                                    None => code { (path) },
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn step(s: &Value, cx: &mut Context) -> Markup {
    let id = s.get("step_id").map(scalar).unwrap_or_default();
    let source = str_of(s, "source").unwrap_or("unknown");
    let source_class = match source {
        "system" | "user" | "agent" => source,
        _ => "unknown",
    };
    let results: Vec<&Value> = s
        .pointer("/observation/results")
        .and_then(Value::as_array)
        .map(|r| r.iter().collect())
        .unwrap_or_default();
    let calls: Vec<&Value> = s
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let call_ids: Vec<&str> = calls
        .iter()
        .filter_map(|c| str_of(c, "tool_call_id"))
        .collect();
    html! {
        article class={ "step " (source_class) } id={ "step-" (id) } data-step-id=(id) {
            header {
                span.step-id { "#" (id) }
                span.source { (source) }
                @if let Some(model) = str_of(s, "model_name") { span.model { (model) } }
                @if let Some(effort) = s.get("reasoning_effort") { span.effort { "effort " (scalar(effort)) } }
                @if let Some(n) = s.get("llm_call_count") { span.calls { (scalar(n)) " LLM calls" } }
                @if s.get("is_copied_context").and_then(Value::as_bool) == Some(true) { span.badge { "copied context" } }
                @if let Some(t) = str_of(s, "timestamp") { time { (t) } }
                @if let Some(m) = s.get("metrics").filter(|m| m.is_object()) { (metrics(m)) }
            }
            div.message { (content(s.get("message").unwrap_or(&Value::Null), cx)) }
            @if let Some(r) = s.get("reasoning_content").filter(|r| !r.is_null()) {
                details.reasoning { summary { "reasoning" } (content(r, cx)) }
            }
            @for call in &calls {
                @let call_id = str_of(call, "tool_call_id").unwrap_or("");
                div.tool-call data-call-id=(call_id) {
                    div.label { "tool call " code.fn { (str_of(call, "function_name").unwrap_or("?")) } " " span.id { (call_id) } }
                    (cut(&serde_json::to_string_pretty(call.get("arguments").unwrap_or(&Value::Null)).unwrap_or_default(), cx))
                    @for result in results.iter().filter(|r| str_of(r, "source_call_id") == Some(call_id) && !call_id.is_empty()) {
                        (observation_result(result, cx))
                    }
                }
            }
            @for result in results.iter().filter(|r| !str_of(r, "source_call_id").is_some_and(|id| call_ids.contains(&id))) {
                (observation_result(result, cx))
            }
        }
    }
}

fn trajectory(t: &Value, cx: &mut Context, depth: usize) -> Markup {
    let steps: &[Value] = t
        .get("steps")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let agent = t.get("agent").cloned().unwrap_or(Value::Null);
    let final_metrics = t.get("final_metrics").filter(|m| m.is_object());
    html! {
        section.trajectory data-steps=(steps.len()) data-depth=(depth) {
            dl.facts {
                dt { "schema" } dd { (str_of(t, "schema_version").unwrap_or("?")) }
                dt { "agent" } dd { (str_of(&agent, "name").unwrap_or("?")) " " (str_of(&agent, "version").unwrap_or("")) }
                @if let Some(model) = str_of(&agent, "model_name") { dt { "model" } dd { (model) } }
                @if let Some(id) = str_of(t, "session_id").or(str_of(t, "trajectory_id")) { dt { "session" } dd { code { (id) } } }
                dt { "steps" } dd.step-count { (steps.len()) }
                @if let Some(m) = final_metrics {
                    @for (key, label) in [("total_prompt_tokens", "prompt tokens"), ("total_cached_tokens", "cached tokens"), ("total_completion_tokens", "completion tokens"), ("total_steps", "total steps (reported)")] {
                        @if let Some(v) = m.get(key).filter(|v| !v.is_null()) { dt { (label) } dd { (scalar(v)) } }
                    }
                    @if let Some(cost) = m.get("total_cost_usd").and_then(Value::as_f64) { dt { "cost" } dd { "$" (format!("{cost:.4}")) } }
                }
            }
            @if let Some(notes) = str_of(t, "notes") { div.notes { (cut(notes, cx)) } }
            @for s in steps.iter().take(MAX_STEPS) { (step(s, cx)) }
            @if steps.len() > MAX_STEPS {
                p.cut { (steps.len() - MAX_STEPS) " more steps not shown; see " a href=(cx.file_href) { "trajectory.json" } }
            }
            @if let Some(next) = str_of(t, "continued_trajectory_ref") {
                p.note { "continued in "
                    @match files::regular_file(cx.agent_dir, next) {
                        Some(file) => a href=(cx.links.to_file(&file)) { (next) },
                        None => code { (next) },
                    }
                }
            }
            @if let Some(subs) = t.get("subagent_trajectories").and_then(Value::as_array) {
                @for sub in subs {
                    details.subagent {
                        summary { "subagent " code { (str_of(sub, "trajectory_id").unwrap_or("?")) } }
                        @if depth < MAX_DEPTH { (trajectory(sub, cx, depth + 1)) }
                        @else { p.note { "nested too deep to show; see " a href=(cx.file_href) { "trajectory.json" } } }
                    }
                }
            }
        }
    }
}
