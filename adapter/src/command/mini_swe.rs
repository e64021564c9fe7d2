//! mini-swe-agent's trajectory (`mini --output FILE`, format `mini-swe-agent-1.1`) to ATIF,
//! step for step as Harbor's `convert_mini_swe_agent_to_atif` does it.
//!
//! The file holds `messages` (the chat as sent to the model, each model answer with its raw
//! response under `extra.response`) and `info` (versions, config, `model_stats.instance_cost`).
//! System messages become system steps, the first user message the user step, each assistant
//! message (or Responses-API `response` object) an agent step with its tool calls and usage, and
//! tool results / later user messages the observations of the agent step before them.

use serde_json::{Map, Value, json};
use tasks::atif::{
    Agent, FinalMetrics, Metrics, Observation, ObservationResult, Step, StepSource, ToolCall,
    Trajectory,
};

/// The agent name written when the file does not say it.
const AGENT_NAME: &str = "mini-swe-agent";

/// Why the file could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MiniSweError(String);

/// Token usage of one message, in chat-completions names.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    prompt: u64,
    completion: u64,
    cached: u64,
    reasoning: u64,
}

fn usage_of(message: &Map<String, Value>) -> Usage {
    let mut usage = &message
        .get("extra")
        .and_then(|e| e.get("response"))
        .and_then(|r| r.get("usage"))
        .cloned()
        .unwrap_or(Value::Null);
    let top;
    if usage.is_null() && message.get("object").and_then(Value::as_str) == Some("response") {
        top = message.get("usage").cloned().unwrap_or(Value::Null);
        usage = &top;
    }
    let int = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| usage.get(*k).and_then(Value::as_u64))
            .unwrap_or(0)
    };
    let detail = |groups: &[&str], key: &str| {
        groups
            .iter()
            .find_map(|g| {
                usage
                    .get(*g)
                    .and_then(|d| d.get(key))
                    .and_then(Value::as_u64)
            })
            .unwrap_or(0)
    };
    Usage {
        prompt: int(&["prompt_tokens", "input_tokens"]),
        completion: int(&["completion_tokens", "output_tokens"]),
        cached: detail(
            &["prompt_tokens_details", "input_tokens_details"],
            "cached_tokens",
        ),
        reasoning: detail(
            &["completion_tokens_details", "output_tokens_details"],
            "reasoning_tokens",
        ),
    }
}

/// Message content as text: a string, or the texts of content parts joined by newlines.
fn text_of(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match p.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => p.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

/// Tool arguments as an object: a JSON string is parsed; anything else goes under `command`.
fn arguments_of(raw: Option<&Value>) -> Map<String, Value> {
    let parsed = match raw {
        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"command": text})),
        Some(Value::Object(map)) => Value::Object(map.clone()),
        None => json!({}),
        Some(other) => json!({"command": other.to_string()}),
    };
    parsed.as_object().cloned().unwrap_or_default()
}

/// A float timestamp (seconds since the epoch) or an ISO string as RFC 3339.
fn timestamp_of(message: &Map<String, Value>) -> Option<String> {
    let from = |value: &Value| -> Option<String> {
        match value {
            Value::Number(n) => {
                let secs = n.as_f64()?;
                let nanos = (secs.fract() * 1e9) as u32;
                chrono::DateTime::from_timestamp(secs.trunc() as i64, nanos)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
            }
            Value::String(text) => chrono::DateTime::parse_from_rfc3339(text)
                .ok()
                .map(|t| t.to_rfc3339()),
            _ => None,
        }
    };
    ["created_at", "timestamp", "completed_at"]
        .iter()
        .find_map(|k| message.get(*k).and_then(from))
        .or_else(|| message.get("extra")?.get("timestamp").and_then(from))
}

/// An agent step's text, reasoning and tool calls.
struct AgentTurn {
    text: String,
    reasoning: Option<String>,
    calls: Vec<ToolCall>,
}

fn chat_turn(message: &Map<String, Value>, step_id: u64) -> AgentTurn {
    let text = text_of(message.get("content"));
    let calls: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, call)| {
            let function = call.get("function");
            ToolCall {
                tool_call_id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("call_{step_id}_{}", i + 1), str::to_owned),
                function_name: function
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("bash")
                    .to_owned(),
                arguments: arguments_of(function.and_then(|f| f.get("arguments"))),
                extra: None,
            }
        })
        .collect();
    if calls.is_empty() {
        AgentTurn {
            text,
            reasoning: None,
            calls,
        }
    } else {
        // With tool calls, the content is the model's reasoning about them.
        let reasoning = (!text.is_empty()).then(|| text.clone());
        AgentTurn {
            text,
            reasoning,
            calls,
        }
    }
}

fn response_turn(message: &Map<String, Value>, step_id: u64) -> AgentTurn {
    let mut texts = Vec::new();
    let mut reasoning = Vec::new();
    let mut calls = Vec::new();
    for item in message
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                let text = text_of(item.get("content"));
                if !text.is_empty() {
                    texts.push(text);
                }
            }
            Some("reasoning") => {
                for key in ["summary", "content"] {
                    for part in item
                        .get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(text) = part.get("text").and_then(Value::as_str) {
                            reasoning.push(text.to_owned());
                        }
                    }
                }
            }
            Some("function_call") => {
                let id = ["call_id", "id"]
                    .iter()
                    .find_map(|k| item.get(*k).and_then(Value::as_str))
                    .map_or_else(
                        || format!("call_{step_id}_{}", calls.len() + 1),
                        str::to_owned,
                    );
                calls.push(ToolCall {
                    tool_call_id: id,
                    function_name: item
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("bash")
                        .to_owned(),
                    arguments: arguments_of(item.get("arguments")),
                    extra: None,
                });
            }
            _ => {}
        }
    }
    AgentTurn {
        text: texts.join("\n"),
        reasoning: (!reasoning.is_empty()).then(|| reasoning.join("\n")),
        calls,
    }
}

/// Adds an observation to the last step when it is an agent step (else it has nowhere to go,
/// as in Harbor, and is dropped).
fn observe(steps: &mut [Step], content: String, call_id: Option<String>) {
    let Some(step) = steps.last_mut().filter(|s| s.source == StepSource::Agent) else {
        return;
    };
    // A result may only name a call of its own step; others stay unattributed.
    let call_id = call_id.filter(|id| {
        step.tool_calls
            .iter()
            .flatten()
            .any(|c| &c.tool_call_id == id)
    });
    let result = ObservationResult {
        source_call_id: call_id,
        content: Some(content.into()),
        ..ObservationResult::default()
    };
    step.observation
        .get_or_insert_with(Observation::default)
        .results
        .push(result);
}

/// Converts a mini-swe-agent trajectory document to ATIF; `model_fallback` names the model
/// when the file does not.
pub fn convert(
    document: &Value,
    session_id: &str,
    model_fallback: Option<&str>,
) -> Result<Trajectory, MiniSweError> {
    let root = document
        .as_object()
        .ok_or_else(|| MiniSweError("the mini-swe-agent trajectory is not a JSON object".into()))?;
    let messages = root
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            MiniSweError("the mini-swe-agent trajectory has no `messages` list".into())
        })?;
    let info = root.get("info").cloned().unwrap_or(Value::Null);
    let model_name = info
        .pointer("/config/model/model_name")
        .and_then(Value::as_str)
        .or(model_fallback)
        .unwrap_or("unknown")
        .to_owned();
    let cost = info
        .pointer("/model_stats/instance_cost")
        .and_then(Value::as_f64)
        .filter(|c| *c > 0.0);
    let all: Vec<&Map<String, Value>> = messages.iter().filter_map(Value::as_object).collect();
    let mut steps = Steps {
        steps: Vec::new(),
        totals: Usage::default(),
        total_completion: all.iter().map(|m| usage_of(m).completion).sum(),
        model_name: model_name.clone(),
        cost,
    };
    for (index, message) in all.iter().enumerate() {
        steps.add(index, message);
    }
    let mut trajectory = Trajectory::new(session_id, agent_of(root, &info, model_name));
    trajectory.notes = Some("Converted from mini-swe-agent trajectory format to ATIF".into());
    trajectory.final_metrics = Some(final_metrics(steps.totals, cost, steps.steps.len() as u64));
    if let Some(exit) = info
        .get("exit_status")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        trajectory.extra = Some(Map::from_iter([("exit_status".to_owned(), json!(exit))]));
    }
    trajectory.steps = steps.steps;
    Ok(trajectory)
}

/// The steps made so far, the usage summed so far, and what every agent step needs.
struct Steps {
    steps: Vec<Step>,
    totals: Usage,
    /// The run's completion tokens, by which its cost is shared among the steps.
    total_completion: u64,
    model_name: String,
    cost: Option<f64>,
}

impl Steps {
    /// Message `index` of the file: a step, an observation of the step before, or nothing.
    fn add(&mut self, index: usize, message: &Map<String, Value>) {
        let usage = usage_of(message);
        self.totals.prompt += usage.prompt;
        self.totals.completion += usage.completion;
        self.totals.cached += usage.cached;
        self.totals.reasoning += usage.reasoning;
        let step_id = self.steps.len() as u64 + 1;
        let timestamp = timestamp_of(message);
        let role = message.get("role").and_then(Value::as_str);
        let is_response = message.get("object").and_then(Value::as_str) == Some("response");
        let is_output = message.get("type").and_then(Value::as_str) == Some("function_call_output");
        if is_response || role == Some("assistant") {
            let turn = if is_response {
                response_turn(message, step_id)
            } else {
                chat_turn(message, step_id)
            };
            let mut step = Step::new(step_id, StepSource::Agent, turn.text);
            step.timestamp = timestamp;
            step.model_name = Some(self.model_name.clone());
            step.reasoning_content = turn.reasoning;
            step.tool_calls = (!turn.calls.is_empty()).then_some(turn.calls);
            step.metrics = step_metrics(usage, self.cost, self.total_completion);
            step.llm_call_count = Some(1);
            self.steps.push(step);
        } else if is_output {
            let output = match message.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => text_of(Some(other)),
                None => text_of(message.get("extra").and_then(|e| e.get("raw_output"))),
            };
            let call = message
                .get("call_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            observe(&mut self.steps, output, call);
        } else {
            self.harness_message(index, role, message, timestamp);
        }
    }

    /// A system message, the task (the first user message), or a later user or tool message
    /// (an observation); `exit` and other harness messages carry no model turn.
    fn harness_message(
        &mut self,
        index: usize,
        role: Option<&str>,
        message: &Map<String, Value>,
        timestamp: Option<String>,
    ) {
        let step_id = self.steps.len() as u64 + 1;
        let source = match role {
            Some("system") => StepSource::System,
            Some("user") if index == 1 => StepSource::User,
            Some("user") | Some("tool") => {
                let call = message.get("tool_call_id").and_then(Value::as_str);
                observe(
                    &mut self.steps,
                    text_of(message.get("content")),
                    call.map(str::to_owned),
                );
                return;
            }
            _ => return,
        };
        let mut step = Step::new(step_id, source, text_of(message.get("content")));
        step.timestamp = timestamp;
        self.steps.push(step);
    }
}

/// The trajectory's agent: mini-swe-agent at the file's version, its format and agent config.
fn agent_of(root: &Map<String, Value>, info: &Value, model_name: String) -> Agent {
    let version = info
        .get("mini_version")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mut agent_extra = Map::new();
    agent_extra.insert(
        "original_format".into(),
        root.get("trajectory_format")
            .cloned()
            .unwrap_or(json!("unknown")),
    );
    if let Some(config) = info.pointer("/config/agent") {
        agent_extra.insert("agent_config".into(), config.clone());
    }
    Agent {
        name: AGENT_NAME.into(),
        version: version.into(),
        model_name: Some(model_name),
        extra: Some(agent_extra),
        ..Agent::default()
    }
}

/// The run's totals (cached and reasoning tokens only when there were any).
fn final_metrics(totals: Usage, cost: Option<f64>, total_steps: u64) -> FinalMetrics {
    FinalMetrics {
        total_prompt_tokens: Some(totals.prompt),
        total_completion_tokens: Some(totals.completion),
        total_cached_tokens: (totals.cached > 0).then_some(totals.cached),
        total_cost_usd: cost,
        total_steps: Some(total_steps),
        extra: (totals.reasoning > 0).then(|| {
            let mut extra = Map::new();
            extra.insert("total_reasoning_tokens".into(), json!(totals.reasoning));
            extra
        }),
    }
}

/// A step's metrics; its cost is its share of the run's cost by completion tokens, as Harbor
/// apportions it (mini-swe-agent reports only the total).
fn step_metrics(usage: Usage, cost: Option<f64>, total_completion: u64) -> Option<Metrics> {
    if usage.prompt == 0 && usage.completion == 0 {
        return None;
    }
    let cost_usd = cost
        .filter(|_| total_completion > 0 && usage.completion > 0)
        .map(|c| c * usage.completion as f64 / total_completion as f64);
    Some(Metrics {
        prompt_tokens: Some(usage.prompt),
        completion_tokens: Some(usage.completion),
        cached_tokens: (usage.cached > 0).then_some(usage.cached),
        cost_usd,
        ..Metrics::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        json!({
            "trajectory_format": "mini-swe-agent-1.1",
            "info": {
                "mini_version": "2.4.6",
                "exit_status": "Submitted",
                "model_stats": {"instance_cost": 0.0, "api_calls": 2},
                "config": {"model": {"model_name": "openai/scripted"}, "agent": {"step_limit": 0}}
            },
            "messages": [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Create /app/hello.txt"},
                {"role": "assistant", "content": "Writing the file.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "bash", "arguments": "{\"command\": \"echo hi > /app/hello.txt\"}"}}],
                 "extra": {"timestamp": 1767225600.5, "response": {"usage": {
                    "prompt_tokens": 100, "completion_tokens": 20,
                    "prompt_tokens_details": {"cached_tokens": 30}}}}},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"returncode\": 0, \"output\": \"\"}"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_2", "type": "function",
                     "function": {"name": "bash", "arguments": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}],
                 "extra": {"response": {"usage": {"prompt_tokens": 150, "completion_tokens": 5,
                    "completion_tokens_details": {"reasoning_tokens": 2}}}}},
                {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}
            ]
        })
    }

    #[test]
    fn converts_a_tool_calling_run_into_valid_atif_with_its_token_totals() {
        let t = convert(&sample(), "s-1", None).unwrap();
        let errors = t.validate();
        assert!(errors.is_empty(), "{errors:?}");
        let sources: Vec<StepSource> = t.steps.iter().map(|s| s.source).collect();
        assert_eq!(
            sources,
            [
                StepSource::System,
                StepSource::User,
                StepSource::Agent,
                StepSource::Agent
            ]
        );
        let first = &t.steps[2];
        let calls = first.tool_calls.as_ref().unwrap();
        assert_eq!(calls[0].arguments["command"], "echo hi > /app/hello.txt");
        assert_eq!(
            first.reasoning_content.as_deref(),
            Some("Writing the file.")
        );
        assert_eq!(
            first.timestamp.as_deref(),
            Some("2026-01-01T00:00:00.500000Z")
        );
        let results = &first.observation.as_ref().unwrap().results;
        assert_eq!(results.len(), 1);
        assert_eq!(first.metrics.as_ref().unwrap().cached_tokens, Some(30));
        // An argument string that is not JSON goes under `command`.
        let second = t.steps[3].tool_calls.as_ref().unwrap();
        assert_eq!(
            second[0].arguments["command"],
            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        );
        let m = t.final_metrics.as_ref().unwrap();
        assert_eq!(m.total_prompt_tokens, Some(250));
        assert_eq!(m.total_completion_tokens, Some(25));
        assert_eq!(m.total_cached_tokens, Some(30));
        assert_eq!(m.total_cost_usd, None);
        assert_eq!(m.total_steps, Some(4));
        assert_eq!(m.extra.as_ref().unwrap()["total_reasoning_tokens"], 2);
        assert_eq!(t.agent.model_name.as_deref(), Some("openai/scripted"));
        assert_eq!(t.agent.version, "2.4.6");
        assert_eq!(t.extra.as_ref().unwrap()["exit_status"], "Submitted");
    }

    #[test]
    fn responses_api_turns_and_costs_are_converted() {
        let doc = json!({
            "info": {"model_stats": {"instance_cost": 0.5}},
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "task"}]},
                {"object": "response", "usage": {"input_tokens": 10, "output_tokens": 4},
                 "output": [
                    {"type": "reasoning", "summary": [{"text": "thinking"}]},
                    {"type": "message", "content": [{"type": "output_text", "text": "ok"}]},
                    {"type": "function_call", "call_id": "fc1", "name": "bash", "arguments": "{\"command\":\"ls\"}"}
                 ]},
                {"type": "function_call_output", "call_id": "fc1", "output": "a b"}
            ]
        });
        let t = convert(&doc, "s", Some("openai/gpt-5")).unwrap();
        assert!(t.validate().is_empty(), "{:?}", t.validate());
        assert_eq!(t.steps[1].message, "task".into());
        let agent = &t.steps[2];
        assert_eq!(agent.reasoning_content.as_deref(), Some("thinking"));
        assert_eq!(agent.message, "ok".into());
        let result = &agent.observation.as_ref().unwrap().results[0];
        assert_eq!(result.source_call_id.as_deref(), Some("fc1"));
        assert_eq!(agent.metrics.as_ref().unwrap().cost_usd, Some(0.5));
        assert_eq!(t.agent.model_name.as_deref(), Some("openai/gpt-5"));
        assert_eq!(t.final_metrics.as_ref().unwrap().total_cost_usd, Some(0.5));
    }

    #[test]
    fn documents_without_messages_are_refused_by_what_is_missing() {
        let err = convert(&json!([1]), "s", None).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");
        let err = convert(&json!({"info": {}}), "s", None).unwrap_err();
        assert!(err.to_string().contains("`messages`"), "{err}");
    }
}
