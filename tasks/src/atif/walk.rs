//! The validator walk: one pass over a JSON document that records every error with its path.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Map, Value};

use super::schema::{self, Field};
use super::{AtifError, Version, timestamp};

mod content;
mod metrics;

/// Collects errors while walking one document (and its embedded subagent trajectories).
pub(crate) struct Walker<'a> {
    /// Errors in document order.
    pub errors: Vec<AtifError>,
    /// Directory of the trajectory file, for image paths; `None` when validating a bare value.
    base_dir: Option<&'a Path>,
}

/// A present, non-null value: Pydantic treats `null` like an absent optional field.
fn get<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Walker<'a> {
    /// A walker; `base_dir` enables the image-path check.
    pub fn new(base_dir: Option<&'a Path>) -> Self {
        Walker {
            errors: Vec::new(),
            base_dir,
        }
    }

    fn err(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(AtifError {
            path: path.to_owned(),
            message: message.into(),
        });
    }

    /// Checks that `value` is an object with only known keys and all required ones.
    fn object<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
        fields: &[Field],
        version: Version,
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = value.as_object() else {
            self.err(path, format!("must be an object, got {}", kind(value)));
            return None;
        };
        for key in map.keys() {
            match fields.iter().find(|f| f.name == key) {
                Some(field) if field.since > version => self.err(
                    &format!("{path}.{key}"),
                    format!(
                        "unknown field `{key}` in {version}: it was introduced in {}",
                        field.since
                    ),
                ),
                Some(_) => {}
                None => {
                    let known: Vec<&str> = fields
                        .iter()
                        .filter(|f| f.since <= version)
                        .map(|f| f.name)
                        .collect();
                    self.err(
                        &format!("{path}.{key}"),
                        format!("unknown field `{key}`; allowed: {}", known.join(", ")),
                    )
                }
            }
        }
        for field in fields
            .iter()
            .filter(|f| f.required && !map.contains_key(f.name))
        {
            self.err(&format!("{path}.{}", field.name), "missing required field");
        }
        Some(map)
    }

    fn string<'v>(&mut self, path: &str, value: &'v Value) -> Option<&'v str> {
        let text = value.as_str();
        if text.is_none() {
            self.err(path, format!("must be a string, got {}", kind(value)));
        }
        text
    }

    fn integer(&mut self, path: &str, value: &Value, min: i64) -> Option<i64> {
        match value.as_i64() {
            Some(n) if n >= min => Some(n),
            Some(n) => {
                self.err(path, format!("must be ≥ {min}, got {n}"));
                None
            }
            None => {
                self.err(path, format!("must be an integer, got {}", kind(value)));
                None
            }
        }
    }

    fn number(&mut self, path: &str, value: &Value) {
        if !value.is_number() {
            self.err(path, format!("must be a number, got {}", kind(value)));
        }
    }

    fn array<'v>(&mut self, path: &str, value: &'v Value) -> Option<&'v Vec<Value>> {
        let items = value.as_array();
        if items.is_none() {
            self.err(path, format!("must be an array, got {}", kind(value)));
        }
        items
    }

    fn any_object(&mut self, path: &str, value: &Value) {
        if !value.is_object() {
            self.err(path, format!("must be an object, got {}", kind(value)));
        }
    }

    /// Optional string fields of `map`.
    fn opt_strings(&mut self, path: &str, map: &Map<String, Value>, keys: &[&str]) {
        for key in keys {
            if let Some(v) = get(map, key) {
                self.string(&format!("{path}.{key}"), v);
            }
        }
    }

    /// A whole trajectory (the root, or an embedded subagent trajectory).
    pub fn trajectory(&mut self, path: &str, value: &Value) {
        let Some(map) = value.as_object() else {
            self.err(path, format!("must be an object, got {}", kind(value)));
            return;
        };
        // The version decides which fields exist, so read it before checking keys.
        let version = match map.get("schema_version") {
            Some(Value::String(s)) => Version::parse(s).unwrap_or_else(|| {
                self.err(
                    &format!("{path}.schema_version"),
                    format!("unknown schema version `{s}`; expected ATIF-v1.0 … ATIF-v1.7 (checked as ATIF-v1.7)"),
                );
                Version::LATEST
            }),
            Some(other) => {
                self.err(&format!("{path}.schema_version"), format!("must be a string, got {}", kind(other)));
                Version::LATEST
            }
            // Reported as a missing required field by `object`.
            None => Version::LATEST,
        };
        self.object(path, value, schema::TRAJECTORY, version);
        if version <= Version::V1_6 && get(map, "session_id").is_none() {
            self.err(
                &format!("{path}.session_id"),
                format!(
                    "missing required field (required up to ATIF-v1.6; this document is {version})"
                ),
            );
        }
        self.opt_strings(
            path,
            map,
            &[
                "session_id",
                "trajectory_id",
                "notes",
                "continued_trajectory_ref",
            ],
        );
        if let Some(extra) = get(map, "extra") {
            self.any_object(&format!("{path}.extra"), extra);
        }
        if let Some(agent) = map.get("agent") {
            self.agent(&format!("{path}.agent"), agent, version);
        }
        if let Some(steps) = map.get("steps") {
            let steps_path = format!("{path}.steps");
            if let Some(steps) = self.array(&steps_path, steps) {
                if steps.is_empty() {
                    self.err(&steps_path, "must have at least one step");
                }
                for (i, step) in steps.iter().enumerate() {
                    self.step(&format!("{steps_path}[{i}]"), step, i, version);
                }
            }
        }
        if let Some(fm) = get(map, "final_metrics") {
            self.final_metrics(&format!("{path}.final_metrics"), fm, version);
        }
        if let Some(subs) = get(map, "subagent_trajectories") {
            self.subagents(&format!("{path}.subagent_trajectories"), subs);
        }
    }

    fn subagents(&mut self, path: &str, value: &Value) {
        let Some(subs) = self.array(path, value) else {
            return;
        };
        let mut seen = HashSet::new();
        for (i, sub) in subs.iter().enumerate() {
            let sub_path = format!("{path}[{i}]");
            self.trajectory(&sub_path, sub);
            match sub.get("trajectory_id").and_then(Value::as_str) {
                None => self.err(
                    &format!("{sub_path}.trajectory_id"),
                    "an embedded subagent trajectory needs a non-null trajectory_id",
                ),
                Some(id) if !seen.insert(id) => self.err(
                    &format!("{sub_path}.trajectory_id"),
                    format!("duplicate trajectory_id `{id}`; embedded subagent trajectory ids must be unique"),
                ),
                Some(_) => {}
            }
        }
    }

    fn agent(&mut self, path: &str, value: &Value, version: Version) {
        let Some(map) = self.object(path, value, schema::AGENT, version) else {
            return;
        };
        for key in ["name", "version"] {
            if let Some(v) = map.get(key) {
                self.string(&format!("{path}.{key}"), v);
            }
        }
        self.opt_strings(path, map, &["model_name"]);
        if let Some(defs) = get(map, "tool_definitions") {
            let defs_path = format!("{path}.tool_definitions");
            if let Some(defs) = self.array(&defs_path, defs) {
                for (i, def) in defs.iter().enumerate() {
                    self.any_object(&format!("{defs_path}[{i}]"), def);
                }
            }
        }
        if let Some(extra) = get(map, "extra") {
            self.any_object(&format!("{path}.extra"), extra);
        }
    }

    fn step(&mut self, path: &str, value: &Value, index: usize, version: Version) {
        let Some(map) = self.object(path, value, schema::STEP, version) else {
            return;
        };
        if let Some(id) = map.get("step_id")
            && let Some(id) = self.integer(&format!("{path}.step_id"), id, 1)
            && id != index as i64 + 1
        {
            self.err(
                &format!("{path}.step_id"),
                format!(
                    "is {id} but must be {} (step ids run 1, 2, 3, … in order)",
                    index + 1
                ),
            );
        }
        if let Some(ts) = get(map, "timestamp")
            && let Some(ts) = self.string(&format!("{path}.timestamp"), ts)
            && !timestamp::is_valid(ts)
        {
            self.err(
                &format!("{path}.timestamp"),
                format!("`{ts}` is not an ISO-8601 timestamp (as Python's datetime.fromisoformat reads it)"),
            );
        }
        let source = match map.get("source") {
            Some(v) => match self.string(&format!("{path}.source"), v) {
                Some(s @ ("system" | "user" | "agent")) => Some(s),
                Some(s) => {
                    self.err(
                        &format!("{path}.source"),
                        format!("`{s}` is not one of system, user, agent"),
                    );
                    None
                }
                None => None,
            },
            None => None,
        };
        self.opt_strings(path, map, &["model_name", "reasoning_content"]);
        if let Some(effort) = get(map, "reasoning_effort")
            && !(effort.is_string() || effort.is_number())
        {
            self.err(
                &format!("{path}.reasoning_effort"),
                format!("must be a string or a number, got {}", kind(effort)),
            );
        }
        if let Some(message) = map.get("message") {
            self.content(&format!("{path}.message"), message, version);
        }
        if let Some(flag) = get(map, "is_copied_context")
            && !flag.is_boolean()
        {
            self.err(
                &format!("{path}.is_copied_context"),
                format!("must be a boolean, got {}", kind(flag)),
            );
        }
        let llm_calls = get(map, "llm_call_count")
            .and_then(|v| self.integer(&format!("{path}.llm_call_count"), v, 0));
        if let Some(extra) = get(map, "extra") {
            self.any_object(&format!("{path}.extra"), extra);
        }
        let mut call_ids = Vec::new();
        if let Some(calls) = get(map, "tool_calls") {
            let calls_path = format!("{path}.tool_calls");
            if let Some(calls) = self.array(&calls_path, calls) {
                for (i, call) in calls.iter().enumerate() {
                    if let Some(id) = self.tool_call(&format!("{calls_path}[{i}]"), call, version) {
                        call_ids.push(id);
                    }
                }
            }
        }
        if let Some(obs) = get(map, "observation") {
            self.observation(&format!("{path}.observation"), obs, version, &call_ids);
        }
        if let Some(metrics) = get(map, "metrics") {
            self.metrics(&format!("{path}.metrics"), metrics, version);
        }
        let Some(source) = source else { return };
        if source != "agent" {
            for key in schema::AGENT_ONLY {
                if get(map, key).is_some() {
                    self.err(
                        &format!("{path}.{key}"),
                        format!(
                            "only agent steps may set `{key}`; this step's source is `{source}`"
                        ),
                    );
                }
            }
            if version < Version::V1_2 && get(map, "observation").is_some() {
                self.err(
                    &format!("{path}.observation"),
                    format!(
                        "only agent steps have observations in {version}; system steps may from ATIF-v1.2 on"
                    ),
                );
            }
        } else if llm_calls == Some(0) {
            for key in ["metrics", "reasoning_content"] {
                if get(map, key).is_some() {
                    self.err(
                        &format!("{path}.{key}"),
                        format!("a step with llm_call_count 0 made no LLM call, so it must not set `{key}`"),
                    );
                }
            }
        }
    }

    /// Checks a tool call and returns its id.
    fn tool_call<'v>(&mut self, path: &str, value: &'v Value, version: Version) -> Option<&'v str> {
        let map = self.object(path, value, schema::TOOL_CALL, version)?;
        if let Some(name) = map.get("function_name") {
            self.string(&format!("{path}.function_name"), name);
        }
        if let Some(args) = map.get("arguments") {
            self.any_object(&format!("{path}.arguments"), args);
        }
        if let Some(extra) = get(map, "extra") {
            self.any_object(&format!("{path}.extra"), extra);
        }
        map.get("tool_call_id")
            .and_then(|id| self.string(&format!("{path}.tool_call_id"), id))
    }

    fn observation(&mut self, path: &str, value: &Value, version: Version, call_ids: &[&str]) {
        let Some(map) = self.object(path, value, schema::OBSERVATION, version) else {
            return;
        };
        let Some(results) = map.get("results") else {
            return;
        };
        let results_path = format!("{path}.results");
        let Some(results) = self.array(&results_path, results) else {
            return;
        };
        for (i, result) in results.iter().enumerate() {
            let result_path = format!("{results_path}[{i}]");
            let Some(rmap) = self.object(&result_path, result, schema::OBSERVATION_RESULT, version)
            else {
                continue;
            };
            if let Some(id) = get(rmap, "source_call_id")
                && let Some(id) = self.string(&format!("{result_path}.source_call_id"), id)
                && !call_ids.contains(&id)
            {
                let known = if call_ids.is_empty() {
                    "none".to_owned()
                } else {
                    call_ids.join(", ")
                };
                self.err(
                    &format!("{result_path}.source_call_id"),
                    format!("`{id}` matches no tool_call_id of the same step (this step's tool calls: {known})"),
                );
            }
            if let Some(content) = get(rmap, "content") {
                self.content(&format!("{result_path}.content"), content, version);
            }
            if let Some(refs) = get(rmap, "subagent_trajectory_ref") {
                let refs_path = format!("{result_path}.subagent_trajectory_ref");
                if let Some(refs) = self.array(&refs_path, refs) {
                    for (j, r) in refs.iter().enumerate() {
                        self.subagent_ref(&format!("{refs_path}[{j}]"), r, version);
                    }
                }
            }
            if let Some(extra) = get(rmap, "extra") {
                self.any_object(&format!("{result_path}.extra"), extra);
            }
        }
    }

    fn subagent_ref(&mut self, path: &str, value: &Value, version: Version) {
        let Some(map) = self.object(path, value, schema::SUBAGENT_REF, version) else {
            return;
        };
        self.opt_strings(
            path,
            map,
            &["trajectory_id", "session_id", "trajectory_path"],
        );
        if get(map, "trajectory_id").is_none() && get(map, "trajectory_path").is_none() {
            self.err(path, "needs a trajectory_id or a trajectory_path");
        }
        if let Some(extra) = get(map, "extra") {
            self.any_object(&format!("{path}.extra"), extra);
        }
    }
}
