//! Codex's rollout log (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`) to ATIF,
//! as Harbor converts it after a `codex` run.
//!
//! Each line is `{timestamp, type, payload}`. `session_meta` names the session and Codex's
//! version, `turn_context` the model. `response_item`s are the conversation as sent to and
//! received from the Responses API: `message`s (role `developer`, `user` or `assistant`),
//! `reasoning`, `function_call` / `custom_tool_call` and their `…_output`. A model call ends
//! with a `token_usage_record` carrying that call's `usage` (OpenAI counts cached input inside
//! `input_tokens`); logs of Codex versions without it have `event_msg` `token_count` entries
//! whose `last_token_usage` is the call's. Everything else (`event_msg` items, world state) is
//! a second view of the same items and is not a step.

use serde_json::{Map, Value};
use tasks::atif::{StepSource, Trajectory};

use super::session_log::{CallUsage, LogError, StepsBuilder, count_of, read_lines, str_of};

/// The agent name written into the trajectory.
const AGENT_NAME: &str = "codex";

/// Converts a rollout log; `model` is the trial's model when the log does not name one.
pub fn convert(bytes: &[u8], model: Option<&str>) -> Result<Trajectory, LogError> {
    let lines = read_lines(bytes)?;
    let of_type = |kind: &'static str| {
        lines
            .iter()
            .filter(move |l| str_of(l, "type") == Some(kind))
            .filter_map(payload)
    };
    let meta = of_type("session_meta")
        .next()
        .ok_or_else(|| LogError("no session_meta line".into()))?;
    let session_id = str_of(meta, "id")
        .or_else(|| str_of(meta, "session_id"))
        .ok_or_else(|| LogError("session_meta names no id".into()))?
        .to_owned();
    let version = str_of(meta, "cli_version").unwrap_or("unknown").to_owned();
    let logged_model = of_type("turn_context").find_map(|c| str_of(c, "model"));
    let model_name = logged_model.map(str::to_owned).or(model.map(str::to_owned));
    let has_usage_records = of_type("token_usage_record").next().is_some();
    let mut steps = StepsBuilder::new(model_name);
    // Each model call's items share one group, closed by the call's usage.
    let mut call = 0usize;
    for line in &lines {
        let Some(item) = payload(line) else { continue };
        let timestamp = str_of(line, "timestamp").map(str::to_owned);
        let group = format!("call-{call}");
        match (str_of(line, "type"), str_of(item, "type")) {
            (Some("response_item"), Some(kind)) => {
                response_item(&mut steps, &group, kind, item, timestamp)
            }
            (Some("token_usage_record"), _) => {
                end_call(&mut steps, &mut call, item.get("usage"));
            }
            (Some("event_msg"), Some("token_count")) if !has_usage_records => {
                let last = item.get("info").and_then(|i| i.get("last_token_usage"));
                if last.is_some() {
                    end_call(&mut steps, &mut call, last);
                }
            }
            _ => {}
        }
    }
    steps.finish(session_id, AGENT_NAME, version, None)
}

/// Model call number `call` ends with its `usage`: the next item starts call `call + 1`.
fn end_call(steps: &mut StepsBuilder, call: &mut usize, usage: Option<&Value>) {
    steps.usage(&format!("call-{call}"), usage_of(usage), None);
    steps.close();
    *call += 1;
}

/// A line's `payload` object.
fn payload(line: &Map<String, Value>) -> Option<&Map<String, Value>> {
    line.get("payload").and_then(Value::as_object)
}

/// OpenAI's usage object in ATIF's terms.
fn usage_of(usage: Option<&Value>) -> CallUsage {
    CallUsage {
        prompt: count_of(usage, "input_tokens"),
        completion: count_of(usage, "output_tokens"),
        cached: count_of(usage, "cached_input_tokens"),
    }
}

fn response_item(
    steps: &mut StepsBuilder,
    group: &str,
    kind: &str,
    item: &Map<String, Value>,
    timestamp: Option<String>,
) {
    match kind {
        "message" => {
            let text = message_text(item.get("content"));
            match str_of(item, "role") {
                Some("assistant") => steps.agent_text(group, &text, timestamp),
                // Codex sends its harness context as a user message; it is not the user's.
                Some("user") if text.starts_with("<environment_context>") => {
                    steps.message(StepSource::System, text, timestamp)
                }
                Some("user") => steps.message(StepSource::User, text, timestamp),
                _ => steps.message(StepSource::System, text, timestamp),
            }
        }
        "reasoning" => {
            let text = message_text(item.get("summary"));
            if !text.is_empty() {
                steps.agent_reasoning(group, &text, timestamp);
            }
        }
        "function_call" => {
            let raw = str_of(item, "arguments").unwrap_or("{}");
            let arguments = match serde_json::from_str::<Value>(raw) {
                Ok(Value::Object(arguments)) => arguments,
                _ => Map::from_iter([("arguments".to_owned(), Value::from(raw))]),
            };
            tool_call(steps, group, item, arguments, timestamp);
        }
        "custom_tool_call" | "local_shell_call" => {
            let input = item.get("input").or_else(|| item.get("action")).cloned();
            let arguments = Map::from_iter([("input".to_owned(), input.unwrap_or(Value::Null))]);
            tool_call(steps, group, item, arguments, timestamp);
        }
        "function_call_output" | "custom_tool_call_output" => {
            if let Some(id) = str_of(item, "call_id") {
                steps.tool_result(id, output_text(item.get("output")));
            }
        }
        _ => {}
    }
}

fn tool_call(
    steps: &mut StepsBuilder,
    group: &str,
    item: &Map<String, Value>,
    arguments: Map<String, Value>,
    timestamp: Option<String>,
) {
    let id = str_of(item, "call_id").or_else(|| str_of(item, "id"));
    let name = str_of(item, "name").unwrap_or("local_shell");
    steps.tool_call(group, id.unwrap_or_default(), name, arguments, timestamp);
}

/// A message's or summary's text parts, joined.
fn message_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A tool output: a string, `{content: …}`, or content parts.
fn output_text(output: Option<&Value>) -> String {
    match output {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(object)) => output_text(object.get("content")),
        Some(parts @ Value::Array(_)) => message_text(Some(parts)),
        _ => String::new(),
    }
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
