//! What the converters of agents' own JSONL logs (Claude Code's session, Codex's rollout)
//! share: reading the lines, and building ATIF steps in order — user and system messages,
//! agent steps with their tool calls, each tool's result attached to the step that called it,
//! and token metrics per model call summed into the final metrics.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use tasks::atif::{
    Agent, Content, FinalMetrics, Metrics, Observation, ObservationResult, Step, StepSource,
    ToolCall, Trajectory,
};

/// Why a log could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LogError(pub String);

/// The JSON objects of a JSONL log. A line that is not JSON is skipped only when it is the
/// last (an agent killed mid-write); anywhere else the log is refused, naming the line.
pub fn read_lines(bytes: &[u8]) -> Result<Vec<Map<String, Value>>, LogError> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut objects = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(object)) => objects.push(object),
            Ok(_) => return Err(LogError(format!("line {} is not a JSON object", index + 1))),
            Err(_) if index + 1 == lines.len() => {}
            Err(e) => return Err(LogError(format!("line {} is not JSON: {e}", index + 1))),
        }
    }
    if objects.is_empty() {
        return Err(LogError("the log has no entries".into()));
    }
    Ok(objects)
}

/// Token counts of one model call, in ATIF's terms: `prompt` counts every input token (cached
/// ones too), `cached` the part read from the provider's cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallUsage {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
}

/// Builds a trajectory step by step.
#[derive(Debug)]
pub struct StepsBuilder {
    steps: Vec<Step>,
    /// The index in `steps` of the agent step that made each tool call.
    caller: BTreeMap<String, usize>,
    /// The open agent step (one model call) and its group key.
    open: Option<(usize, String)>,
    model: Option<String>,
}

impl StepsBuilder {
    pub fn new(model: Option<String>) -> Self {
        Self {
            steps: Vec::new(),
            caller: BTreeMap::new(),
            open: None,
            model,
        }
    }

    fn push(&mut self, mut step: Step) -> usize {
        step.step_id = self.steps.len() as u64 + 1;
        self.steps.push(step);
        self.steps.len() - 1
    }

    /// A user or system message (closes the open agent step).
    pub fn message(&mut self, source: StepSource, text: String, timestamp: Option<String>) {
        self.open = None;
        let mut step = Step::new(0, source, text);
        step.timestamp = timestamp;
        self.push(step);
    }

    /// The agent step of the model call `group` (a response or request id), opened when the
    /// previous entry belonged to another call.
    fn agent_step(&mut self, group: &str, timestamp: Option<String>) -> &mut Step {
        let index = match &self.open {
            Some((index, open)) if open == group => *index,
            _ => {
                let mut step = Step::new(0, StepSource::Agent, String::new());
                step.timestamp = timestamp;
                step.model_name = self.model.clone();
                let index = self.push(step);
                self.open = Some((index, group.to_owned()));
                index
            }
        };
        &mut self.steps[index]
    }

    /// Text the model wrote in call `group`.
    pub fn agent_text(&mut self, group: &str, text: &str, timestamp: Option<String>) {
        let step = self.agent_step(group, timestamp);
        let message = match &step.message {
            Content::Text(text) => text.as_str(),
            Content::Parts(_) => "",
        };
        let joined = if message.is_empty() {
            text.to_owned()
        } else {
            format!("{message}\n\n{text}")
        };
        step.message = joined.into();
    }

    /// Reasoning the model showed in call `group`.
    pub fn agent_reasoning(&mut self, group: &str, text: &str, timestamp: Option<String>) {
        let step = self.agent_step(group, timestamp);
        step.reasoning_content = Some(match step.reasoning_content.take() {
            Some(before) => format!("{before}\n\n{text}"),
            None => text.to_owned(),
        });
    }

    /// A tool call of call `group`.
    pub fn tool_call(
        &mut self,
        group: &str,
        id: &str,
        name: &str,
        arguments: Map<String, Value>,
        timestamp: Option<String>,
    ) {
        self.agent_step(group, timestamp);
        let index = self.open.as_ref().map(|(i, _)| *i).unwrap_or_default();
        self.caller.insert(id.to_owned(), index);
        let calls = self.steps[index].tool_calls.get_or_insert_with(Vec::new);
        calls.push(ToolCall {
            tool_call_id: id.to_owned(),
            function_name: name.to_owned(),
            arguments,
            extra: None,
        });
    }

    /// The result of tool call `id`, attached to the step that made it (a result whose call is
    /// unknown is dropped: ATIF ties every result to a call of its own step).
    pub fn tool_result(&mut self, id: &str, content: String) {
        let Some(&index) = self.caller.get(id) else {
            return;
        };
        let observation = self.steps[index]
            .observation
            .get_or_insert_with(Observation::default);
        observation.results.push(ObservationResult {
            source_call_id: Some(id.to_owned()),
            content: Some(content.into()),
            ..ObservationResult::default()
        });
    }

    /// The usage of model call `group`. A call that logs several entries repeats its usage on
    /// each, the later ones complete (a streamed call's output count grows), so the last wins.
    pub fn usage(&mut self, group: &str, usage: CallUsage, extra: Option<Map<String, Value>>) {
        let step = self.agent_step(group, None);
        step.metrics = Some(Metrics {
            prompt_tokens: Some(usage.prompt),
            completion_tokens: Some(usage.completion),
            cached_tokens: Some(usage.cached),
            extra,
            ..Metrics::default()
        });
        step.llm_call_count = Some(1);
    }

    /// Ends the open agent step: the next entry starts a new one.
    pub fn close(&mut self) {
        self.open = None;
    }

    /// The trajectory of agent `name` at `version` (its model the one the steps name), with
    /// final metrics summed over the calls (and `cost_usd` when the agent's log reports its
    /// own).
    pub fn finish(
        self,
        session_id: String,
        name: &str,
        version: String,
        cost_usd: Option<f64>,
    ) -> Result<Trajectory, LogError> {
        if !self
            .steps
            .iter()
            .any(|s| matches!(s.source, StepSource::Agent))
        {
            return Err(LogError("the log has no model answer".into()));
        }
        let mut totals = CallUsage::default();
        let mut calls = 0u64;
        for metrics in self.steps.iter().filter_map(|s| s.metrics.as_ref()) {
            totals.prompt += metrics.prompt_tokens.unwrap_or(0);
            totals.completion += metrics.completion_tokens.unwrap_or(0);
            totals.cached += metrics.cached_tokens.unwrap_or(0);
            calls += 1;
        }
        let agent = Agent {
            name: name.into(),
            version,
            model_name: self.model.clone(),
            ..Agent::default()
        };
        let mut trajectory = Trajectory::new(session_id, agent);
        let mut extra = Map::new();
        extra.insert("llm_calls".into(), calls.into());
        trajectory.final_metrics = Some(FinalMetrics {
            total_prompt_tokens: Some(totals.prompt),
            total_completion_tokens: Some(totals.completion),
            total_cached_tokens: Some(totals.cached),
            total_cost_usd: cost_usd,
            total_steps: Some(self.steps.len() as u64),
            extra: Some(extra),
        });
        trajectory.steps = self.steps;
        Ok(trajectory)
    }
}

/// A string field of `object`.
pub fn str_of<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

/// A count field of `object` (0 when absent).
pub fn count_of(object: Option<&Value>, key: &str) -> u64 {
    object
        .and_then(|o| o.get(key))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "session_log_golden.rs"]
pub(super) mod golden;
