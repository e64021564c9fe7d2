//! Converting an agent's JSONL event log into an ATIF-v1.6 trajectory, and reading token counts
//! and cost back out of a trajectory for `agent_result`.
//!
//! Event log: one JSON object per line, each with a `type`:
//! - `message`: `source` (`user` | `agent` | `system`), `text`, optional `timestamp`, `model_name`.
//! - `tool_call`: `call_id`, `name`, `arguments` (object), optional `text` (the agent's
//!   reasoning before the call), `timestamp`, `model_name`. Becomes one agent step.
//! - `tool_result`: `call_id`, `output`, optional `exit_code`. Attached as the observation of
//!   the step holding that call.
//! - `usage`: `prompt_tokens`, `completion_tokens`, `cached_tokens`, `cost_usd` (all optional),
//!   added to the latest agent step's metrics and to the totals.
//! - `status`: `status`; recorded in the trajectory notes.
//!
//! Other types are skipped and counted in the trajectory's `extra.skipped_events`.

use serde_json::{Map, Value, json};
use tasks::records::AgentContext;

/// The schema version written.
pub const SCHEMA_VERSION: &str = "ATIF-v1.6";

/// What the trajectory's `agent` object says.
#[derive(Debug, Clone)]
pub struct TrajectoryAgent<'a> {
    /// Agent name (equals `agent_info.name`).
    pub name: &'a str,
    /// Agent version.
    pub version: &'a str,
    /// `provider/model`, if any.
    pub model_name: Option<&'a str>,
}

/// Why an event log could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event log line {line}: {message}")]
pub struct ConversionError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Default)]
struct Totals {
    prompt: Option<u64>,
    completion: Option<u64>,
    cached: Option<u64>,
    cost: Option<f64>,
}

fn add_u64(slot: &mut Option<u64>, value: Option<u64>) {
    if let Some(v) = value {
        *slot = Some(slot.unwrap_or(0) + v);
    }
}

fn add_metric(metrics: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    let Some(value) = value else { return };
    let sum = match (metrics.get(key), &value) {
        (Some(Value::Number(a)), Value::Number(b)) if a.is_u64() && b.is_u64() => {
            json!(a.as_u64().unwrap_or(0) + b.as_u64().unwrap_or(0))
        }
        (Some(Value::Number(a)), Value::Number(b)) => {
            json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0))
        }
        _ => value,
    };
    metrics.insert(key.into(), sum);
}

/// Converts `events` (JSONL text) to an ATIF trajectory. When the log does not start with a
/// user message, `instruction` (the exact text sent) becomes step 1.
pub fn convert_events(
    events: &str,
    agent: &TrajectoryAgent<'_>,
    session_id: &str,
    instruction: &str,
) -> Result<Value, ConversionError> {
    let mut log = EventLog::new(instruction);
    for (index, line) in events.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        log.read(line).map_err(|message| ConversionError {
            line: index + 1,
            message,
        })?;
    }
    Ok(log.into_trajectory(agent, session_id))
}

/// The trajectory being built from an event log, one line at a time.
struct EventLog<'a> {
    /// Step 1 when the log does not start with a user message.
    instruction: &'a str,
    steps: Vec<Map<String, Value>>,
    totals: Totals,
    skipped: u64,
    statuses: Vec<String>,
}

/// A string field of an event.
fn text(event: &Map<String, Value>, key: &str) -> Option<String> {
    event.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl<'a> EventLog<'a> {
    fn new(instruction: &'a str) -> Self {
        Self {
            instruction,
            steps: Vec::new(),
            totals: Totals::default(),
            skipped: 0,
            statuses: Vec::new(),
        }
    }

    /// One line of the log; `Err` says what is wrong with it.
    fn read(&mut self, line: &str) -> Result<(), String> {
        let event: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let Some(event) = event.as_object() else {
            return Err("not a JSON object".into());
        };
        let mut step = Map::new();
        if let Some(ts) = text(event, "timestamp") {
            step.insert("timestamp".into(), json!(ts));
        }
        match event.get("type").and_then(Value::as_str) {
            Some("message") => self.message(event, step)?,
            Some("tool_call") => self.tool_call(event, step)?,
            Some("tool_result") => self.tool_result(event)?,
            Some("usage") => self.usage(event),
            Some("status") => self.statuses.extend(text(event, "status")),
            _ => self.skipped += 1,
        }
        Ok(())
    }

    /// A user, agent or system message: a step of its own.
    fn message(
        &mut self,
        event: &Map<String, Value>,
        mut step: Map<String, Value>,
    ) -> Result<(), String> {
        let source = text(event, "source").ok_or("a message needs a `source`")?;
        if !matches!(source.as_str(), "user" | "agent" | "system") {
            return Err(format!("unknown message source `{source}`"));
        }
        if self.steps.is_empty() && source != "user" {
            self.steps.push(user_step(self.instruction));
        }
        step.insert("source".into(), json!(source));
        if source == "agent"
            && let Some(model) = text(event, "model_name")
        {
            step.insert("model_name".into(), json!(model));
        }
        step.insert(
            "message".into(),
            json!(text(event, "text").unwrap_or_default()),
        );
        self.steps.push(step);
        Ok(())
    }

    /// A tool call: an agent step with that one call.
    fn tool_call(
        &mut self,
        event: &Map<String, Value>,
        mut step: Map<String, Value>,
    ) -> Result<(), String> {
        if self.steps.is_empty() {
            self.steps.push(user_step(self.instruction));
        }
        let call_id = text(event, "call_id").ok_or("a tool_call needs a `call_id`")?;
        let name = text(event, "name").ok_or("a tool_call needs a `name`")?;
        let arguments = match event.get("arguments") {
            None => json!({}),
            Some(Value::Object(map)) => Value::Object(map.clone()),
            Some(_) => return Err("tool_call `arguments` must be an object".into()),
        };
        step.insert("source".into(), json!("agent"));
        if let Some(model) = text(event, "model_name") {
            step.insert("model_name".into(), json!(model));
        }
        step.insert(
            "message".into(),
            json!(text(event, "text").unwrap_or_default()),
        );
        step.insert(
            "tool_calls".into(),
            json!([{"tool_call_id": call_id, "function_name": name, "arguments": arguments}]),
        );
        self.steps.push(step);
        Ok(())
    }

    /// A tool's result: an observation of the latest step that made the call.
    fn tool_result(&mut self, event: &Map<String, Value>) -> Result<(), String> {
        let call_id = text(event, "call_id").ok_or("a tool_result needs a `call_id`")?;
        let target = self.steps.iter_mut().rev().find(|s| {
            s.get("tool_calls")
                .and_then(Value::as_array)
                .is_some_and(|calls| calls.iter().any(|c| c["tool_call_id"] == call_id.as_str()))
        });
        let Some(target) = target else {
            return Err(format!("tool_result for unknown call_id `{call_id}`"));
        };
        let mut content = text(event, "output").unwrap_or_default();
        if let Some(code) = event.get("exit_code").filter(|c| !c.is_null()) {
            if !content.is_empty() && !content.ends_with('\n') {
                content.push('\n');
            }
            content.push_str(&format!("[exit code: {code}]"));
        }
        let observation = target
            .entry("observation")
            .or_insert_with(|| json!({"results": []}));
        if let Some(results) = observation["results"].as_array_mut() {
            results.push(json!({"source_call_id": call_id, "content": content}));
        }
        Ok(())
    }

    /// Token counts and cost: added to the totals and to the latest agent step's metrics.
    fn usage(&mut self, event: &Map<String, Value>) {
        let num = |key: &str| event.get(key).filter(|v| v.is_number()).cloned();
        let int = |key: &str| event.get(key).and_then(Value::as_u64);
        let totals = &mut self.totals;
        add_u64(&mut totals.prompt, int("prompt_tokens"));
        add_u64(&mut totals.completion, int("completion_tokens"));
        add_u64(&mut totals.cached, int("cached_tokens"));
        if let Some(cost) = event.get("cost_usd").and_then(Value::as_f64) {
            totals.cost = Some(totals.cost.unwrap_or(0.0) + cost);
        }
        let Some(step) = self.steps.iter_mut().rev().find(|s| s["source"] == "agent") else {
            return;
        };
        let metrics = step.entry("metrics").or_insert_with(|| json!({}));
        if let Some(metrics) = metrics.as_object_mut() {
            for key in [
                "prompt_tokens",
                "completion_tokens",
                "cached_tokens",
                "cost_usd",
            ] {
                add_metric(metrics, key, num(key));
            }
        }
    }

    /// The trajectory: the steps numbered, the last status as a note, the totals.
    fn into_trajectory(mut self, agent: &TrajectoryAgent<'_>, session_id: &str) -> Value {
        if self.steps.is_empty() {
            self.steps.push(user_step(self.instruction));
        }
        for (i, step) in self.steps.iter_mut().enumerate() {
            // step_id first for readability; ids are sequential from 1 as ATIF requires.
            let mut ordered = Map::new();
            ordered.insert("step_id".into(), json!(i + 1));
            ordered.extend(std::mem::take(step));
            *step = ordered;
        }
        let mut trajectory = Map::new();
        trajectory.insert("schema_version".into(), json!(SCHEMA_VERSION));
        trajectory.insert("session_id".into(), json!(session_id));
        let mut agent_obj = json!({"name": agent.name, "version": agent.version});
        if let Some(model) = agent.model_name {
            agent_obj["model_name"] = json!(model);
        }
        trajectory.insert("agent".into(), agent_obj);
        let total_steps = self.steps.len();
        trajectory.insert(
            "steps".into(),
            Value::Array(self.steps.into_iter().map(Value::Object).collect()),
        );
        if let Some(last) = self.statuses.last() {
            trajectory.insert(
                "notes".into(),
                json!(format!("final status reported by the agent: {last}")),
            );
        }
        trajectory.insert(
            "final_metrics".into(),
            final_metrics(&self.totals, total_steps),
        );
        if self.skipped > 0 {
            trajectory.insert("extra".into(), json!({"skipped_events": self.skipped}));
        }
        Value::Object(trajectory)
    }
}

/// `final_metrics`: the totals the log reported, and the step count.
fn final_metrics(totals: &Totals, total_steps: usize) -> Value {
    let mut final_metrics = Map::new();
    let pairs = [
        ("total_prompt_tokens", totals.prompt.map(Value::from)),
        (
            "total_completion_tokens",
            totals.completion.map(Value::from),
        ),
        ("total_cached_tokens", totals.cached.map(Value::from)),
        ("total_cost_usd", totals.cost.map(Value::from)),
    ];
    for (key, value) in pairs {
        if let Some(value) = value {
            final_metrics.insert(key.into(), value);
        }
    }
    final_metrics.insert("total_steps".into(), json!(total_steps));
    Value::Object(final_metrics)
}

fn user_step(instruction: &str) -> Map<String, Value> {
    let mut step = Map::new();
    step.insert("source".into(), json!("user"));
    step.insert("message".into(), json!(instruction));
    step
}

/// Every problem the shared ATIF validator found in a trajectory (at least one); the
/// message lists them, separated by `; `.
#[derive(Debug)]
pub struct InvalidTrajectory(pub Vec<tasks::atif::AtifError>);

impl std::fmt::Display for InvalidTrajectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidTrajectory {}

/// Validates a trajectory with the shared ATIF validator; `Err` lists every problem.
pub fn validate(trajectory: &Value) -> Result<(), InvalidTrajectory> {
    let errors = tasks::atif::validate_value(trajectory);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InvalidTrajectory(errors))
    }
}

/// Token counts and cost from a trajectory's `final_metrics`, when it has any.
pub fn context_from_trajectory(trajectory: &Value) -> Option<AgentContext> {
    let metrics = trajectory.get("final_metrics")?;
    let context = AgentContext {
        n_input_tokens: metrics.get("total_prompt_tokens").and_then(Value::as_u64),
        n_cache_tokens: metrics.get("total_cached_tokens").and_then(Value::as_u64),
        n_output_tokens: metrics
            .get("total_completion_tokens")
            .and_then(Value::as_u64),
        cost_usd: metrics.get("total_cost_usd").and_then(Value::as_f64),
        ..Default::default()
    };
    let any = context.n_input_tokens.is_some()
        || context.n_cache_tokens.is_some()
        || context.n_output_tokens.is_some()
        || context.cost_usd.is_some();
    any.then_some(context)
}

/// Token counts and cost from a status answer's `usage` object, when the agent reports one.
pub fn context_from_usage(status_body: &Value) -> Option<AgentContext> {
    let usage = status_body.get("usage")?.as_object()?;
    Some(AgentContext {
        n_input_tokens: usage.get("prompt_tokens").and_then(Value::as_u64),
        n_cache_tokens: usage.get("cached_tokens").and_then(Value::as_u64),
        n_output_tokens: usage.get("completion_tokens").and_then(Value::as_u64),
        cost_usd: usage.get("cost_usd").and_then(Value::as_f64),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: TrajectoryAgent<'static> = TrajectoryAgent {
        name: "ref",
        version: "1.0",
        model_name: Some("none/scripted"),
    };

    #[test]
    fn converts_a_full_log_into_a_valid_trajectory() {
        let log = r#"{"type":"message","source":"agent","text":"Plan: write the file.","timestamp":"2026-01-01T00:00:00Z"}
{"type":"tool_call","call_id":"c1","name":"bash","arguments":{"command":"echo hi"},"text":"run it","model_name":"m"}
{"type":"usage","prompt_tokens":100,"completion_tokens":20,"cached_tokens":40,"cost_usd":0.5}
{"type":"tool_result","call_id":"c1","output":"hi\n","exit_code":0}
{"type":"tool_call","call_id":"c2","name":"bash","arguments":{"command":"false"}}
{"type":"usage","prompt_tokens":50,"completion_tokens":5,"cost_usd":0.25}
{"type":"tool_result","call_id":"c2","output":"","exit_code":1}
{"type":"heartbeat"}
{"type":"status","status":"completed"}
"#;
        let t = convert_events(log, &AGENT, "task-1", "Do the thing.\n").unwrap();
        validate(&t).unwrap();
        let steps = t["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[0]["source"], "user");
        assert_eq!(steps[0]["message"], "Do the thing.\n");
        assert_eq!(steps[1]["step_id"], 2);
        assert_eq!(steps[2]["tool_calls"][0]["arguments"]["command"], "echo hi");
        assert_eq!(
            steps[2]["observation"]["results"][0]["content"],
            "hi\n[exit code: 0]"
        );
        assert_eq!(
            steps[2]["observation"]["results"][0]["source_call_id"],
            "c1"
        );
        assert_eq!(steps[2]["metrics"]["prompt_tokens"], 100);
        assert_eq!(
            steps[3]["observation"]["results"][0]["content"],
            "[exit code: 1]"
        );
        assert_eq!(t["final_metrics"]["total_prompt_tokens"], 150);
        assert_eq!(t["final_metrics"]["total_cached_tokens"], 40);
        assert_eq!(t["final_metrics"]["total_steps"], 4);
        assert_eq!(t["extra"]["skipped_events"], 1);
        assert_eq!(t["schema_version"], SCHEMA_VERSION);
        let ctx = context_from_trajectory(&t).unwrap();
        assert_eq!(
            (ctx.n_input_tokens, ctx.n_output_tokens, ctx.n_cache_tokens),
            (Some(150), Some(25), Some(40))
        );
        assert_eq!(ctx.cost_usd, Some(0.75));
    }

    #[test]
    fn empty_log_still_gives_a_valid_trajectory_with_the_instruction() {
        let t = convert_events("", &AGENT, "s", "hello").unwrap();
        validate(&t).unwrap();
        assert_eq!(t["steps"][0]["message"], "hello");
        assert!(context_from_trajectory(&t).is_none());
    }

    #[test]
    fn broken_logs_are_conversion_errors() {
        let e = convert_events(
            "{\"type\":\"tool_result\",\"call_id\":\"x\"}",
            &AGENT,
            "s",
            "i",
        )
        .unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("unknown call_id"));
        let e = convert_events("\n{oops", &AGENT, "s", "i").unwrap_err();
        assert_eq!(e.line, 2);
        let e = convert_events(
            r#"{"type":"tool_call","call_id":"a","name":"b","arguments":[1]}"#,
            &AGENT,
            "s",
            "i",
        )
        .unwrap_err();
        assert!(e.message.contains("object"));
    }

    #[test]
    fn invalid_timestamps_fail_validation() {
        let t = convert_events(
            r#"{"type":"message","source":"agent","text":"x","timestamp":"yesterday"}"#,
            &AGENT,
            "s",
            "i",
        )
        .unwrap();
        let err = validate(&t).unwrap_err().to_string();
        assert!(err.contains("timestamp"), "{err}");
    }
}
