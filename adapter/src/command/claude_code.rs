//! Claude Code's session log (`$CLAUDE_CONFIG_DIR/projects/<cwd>/<session-uuid>.jsonl`) to
//! ATIF, as Harbor converts it after a `claude-code` run.
//!
//! The log is one JSON object per line. `user` entries hold the prompt (a string or text
//! parts) or tool results (`tool_result` parts, each naming its `tool_use_id`); `assistant`
//! entries hold one content block each — text, thinking or a `tool_use` — so one model call
//! writes several entries sharing its `requestRef` (and message id), each repeating the
//! call's `usage`. Anthropic counts `input_tokens` without the cached part, so a call's prompt
//! is `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`. Entries of a
//! sub-agent (`isSidechain`) and bookkeeping entries (attachments, request shapes, costs) are
//! not steps; the last `cost-state` entry gives Claude Code's own cost estimate.

use serde_json::{Map, Value};
use tasks::atif::{StepSource, Trajectory};

use super::session_log::{CallUsage, LogError, StepsBuilder, count_of, read_lines, str_of};

/// The agent name written into the trajectory.
const AGENT_NAME: &str = "claude-code";

/// Converts a session log; `model` is the trial's model (`provider/name`) when the log does
/// not name one.
pub fn convert(bytes: &[u8], model: Option<&str>) -> Result<Trajectory, LogError> {
    let entries = read_lines(bytes)?;
    let session_id = entries
        .iter()
        .find_map(|e| str_of(e, "sessionId"))
        .ok_or_else(|| LogError("no entry names its sessionId".into()))?
        .to_owned();
    let version = entries
        .iter()
        .find_map(|e| str_of(e, "version"))
        .unwrap_or("unknown")
        .to_owned();
    let logged_model = entries.iter().find_map(|e| {
        (str_of(e, "type") == Some("assistant"))
            .then(|| e.get("message").and_then(|m| m.get("model")))
            .flatten()
            .and_then(Value::as_str)
    });
    let model_name = logged_model.map(str::to_owned).or(model.map(str::to_owned));
    let mut steps = StepsBuilder::new(model_name);
    let mut cost = None;
    for entry in &entries {
        if entry.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let timestamp = str_of(entry, "timestamp").map(str::to_owned);
        match str_of(entry, "type") {
            Some("user") => user_entry(&mut steps, entry, timestamp),
            Some("assistant") => assistant_entry(&mut steps, entry, timestamp),
            Some("cost-state") => cost = entry.get("totalCostUSD").and_then(Value::as_f64),
            _ => {}
        }
    }
    steps.finish(session_id, AGENT_NAME, version, cost)
}

/// A prompt (a user step) or tool results (observations of the steps that called them).
fn user_entry(steps: &mut StepsBuilder, entry: &Map<String, Value>, timestamp: Option<String>) {
    let content = entry.get("message").and_then(|m| m.get("content"));
    match content {
        Some(Value::String(text)) => steps.message(StepSource::User, text.clone(), timestamp),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("tool_result") => {
                        let id = part.get("tool_use_id").and_then(Value::as_str);
                        if let Some(id) = id {
                            steps.tool_result(id, result_text(part.get("content")));
                        }
                    }
                    Some("text") => {
                        texts.extend(part.get("text").and_then(Value::as_str).map(str::to_owned))
                    }
                    _ => {}
                }
            }
            if !texts.is_empty() {
                steps.message(StepSource::User, texts.join("\n\n"), timestamp);
            }
        }
        _ => {}
    }
}

/// A tool result's content: a string, or text parts joined.
fn result_text(content: Option<&Value>) -> String {
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

/// One content block of a model call, and the call's usage.
fn assistant_entry(
    steps: &mut StepsBuilder,
    entry: &Map<String, Value>,
    timestamp: Option<String>,
) {
    let Some(message) = entry.get("message").and_then(Value::as_object) else {
        return;
    };
    let group = str_of(entry, "requestRef")
        .or_else(|| str_of(message, "id"))
        .or_else(|| str_of(entry, "uuid"))
        .unwrap_or_default()
        .to_owned();
    let blocks = message.get("content").and_then(Value::as_array);
    for block in blocks.into_iter().flatten() {
        let text = |key| block.get(key).and_then(Value::as_str);
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = text("text") {
                    steps.agent_text(&group, t, timestamp.clone());
                }
            }
            Some("thinking") => {
                if let Some(t) = text("thinking") {
                    steps.agent_reasoning(&group, t, timestamp.clone());
                }
            }
            Some("tool_use") => {
                let arguments = match block.get("input") {
                    Some(Value::Object(input)) => input.clone(),
                    Some(other) => Map::from_iter([("input".to_owned(), other.clone())]),
                    None => Map::new(),
                };
                let (id, name) = (
                    text("id").unwrap_or_default(),
                    text("name").unwrap_or_default(),
                );
                steps.tool_call(&group, id, name, arguments, timestamp.clone());
            }
            _ => {}
        }
    }
    if let Some(usage) = message.get("usage") {
        let input = count_of(Some(usage), "input_tokens");
        let read = count_of(Some(usage), "cache_read_input_tokens");
        let written = count_of(Some(usage), "cache_creation_input_tokens");
        let mut extra = Map::new();
        extra.insert("cache_creation_input_tokens".into(), written.into());
        let call = CallUsage {
            prompt: input + read + written,
            completion: count_of(Some(usage), "output_tokens"),
            cached: read,
        };
        steps.usage(&group, call, Some(extra));
    }
}

#[cfg(test)]
#[path = "claude_code_tests.rs"]
mod tests;
