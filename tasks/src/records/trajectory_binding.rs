//! Whether a trial's `agent/trajectory.json` belongs to it: its agent and model are the ones
//! the trial's `agent_info` names, its first user message holds the task's instruction, and no
//! other trial of the submission carries the same `session_id` (ATIF's id of one agent run:
//! two trials cannot have been one run). Read as JSON values, so any ATIF version (and
//! Harbor's writers) are judged alike. An agent whose session ids are a per-container counter
//! fails this: the reference agent's task ids, its session ids, carry a random part per start.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{read, str_at};

/// Where a trial keeps its trajectory.
pub const TRAJECTORY: &str = "agent/trajectory.json";

/// What a trajectory says about whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrajectoryFacts {
    /// `session_id` (or v1.7's `trajectory_id`).
    pub session_id: Option<String>,
    /// `agent.name`.
    pub agent: Option<String>,
    /// `agent.model_name`.
    pub model: Option<String>,
    /// The text of the first step whose source is `user`.
    pub first_user_message: Option<String>,
}

/// The trajectory of the trial dir `trial_dir`: `None` when it has none, `Err` when it is not
/// a JSON object.
pub fn read_trajectory(trial_dir: &Path) -> Option<Result<TrajectoryFacts, String>> {
    let path = trial_dir.join(TRAJECTORY);
    let value = match read::read_json(&path) {
        Ok(Some(v)) => v,
        Ok(None) => return None,
        Err(e) => return Some(Err(e.to_string())),
    };
    if !value.is_object() {
        return Some(Err(format!("{TRAJECTORY} is not a JSON object")));
    }
    Some(Ok(facts_of(&value)))
}

/// The facts of a trajectory read as JSON.
pub fn facts_of(value: &Value) -> TrajectoryFacts {
    let steps = value.get("steps").unwrap_or(&Value::Null);
    let first_user_message = steps.as_array().and_then(|steps| {
        let step = steps
            .iter()
            .find(|s| s.get("source").and_then(Value::as_str) == Some("user"))?;
        Some(message_text(step.get("message")?))
    });
    TrajectoryFacts {
        session_id: str_at(value, "/session_id")
            .or_else(|| str_at(value, "/trajectory_id"))
            .map(str::to_owned),
        agent: str_at(value, "/agent/name").map(str::to_owned),
        model: str_at(value, "/agent/model_name").map(str::to_owned),
        first_user_message,
    }
}

/// A message's text: a string, or its text parts joined.
fn message_text(message: &Value) -> String {
    match message {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What ties the trajectory `facts` to a trial whose result is `result` falsely: its agent
/// or model differs from `agent_info`, or (given the task's `instruction`) its first user
/// message does not hold the instruction.
pub fn binding_problems(
    facts: &TrajectoryFacts,
    result: &Value,
    instruction: Option<&str>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let agent_info = result.get("agent_info").unwrap_or(&Value::Null);
    let recorded_agent = str_at(agent_info, "/name");
    if let (Some(t), Some(r)) = (&facts.agent, recorded_agent)
        && t != r
    {
        problems.push(format!(
            "its agent is {t:?}, the trial's agent_info names {r:?}"
        ));
    }
    let recorded_model = read::model_of(agent_info);
    if let (Some(t), Some(r)) = (&facts.model, &recorded_model)
        && !same_model(t, r)
    {
        problems.push(format!(
            "its model is {t:?}, the trial's agent_info names {r:?}"
        ));
    }
    if let Some(instruction) = instruction.map(words).filter(|i| !i.is_empty()) {
        match facts.first_user_message.as_deref().map(words) {
            None => problems.push("it has no user message, so no instruction of the task".into()),
            // The message may wrap the instruction (a prompt template, a suffix) or be the
            // instruction as sent (canary lines and outer whitespace dropped).
            Some(m) if !(m.contains(&instruction) || (!m.is_empty() && instruction.contains(&m))) => {
                problems.push(
                    "its first user message is not the task's instruction (another task's or another trial's trajectory?)".into(),
                )
            }
            Some(_) => {}
        }
    }
    problems
}

/// `text` with every run of whitespace as one space, trimmed.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Models are the same when equal, or equal once one's `provider/` is dropped.
fn same_model(a: &str, b: &str) -> bool {
    let bare = |m: &str| m.rsplit('/').next().unwrap_or(m).to_owned();
    a == b || (!(a.contains('/') && b.contains('/')) && bare(a) == bare(b))
}

/// Sessions found in more than one trial: each session id with the trials (labels) holding it.
pub fn repeated_sessions<'a>(
    trials: impl IntoIterator<Item = (&'a str, &'a TrajectoryFacts)>,
) -> Vec<(String, Vec<&'a str>)> {
    let mut by_session: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (label, facts) in trials {
        if let Some(id) = &facts.session_id {
            by_session.entry(id).or_default().push(label);
        }
    }
    by_session
        .into_iter()
        .filter(|(_, labels)| labels.len() > 1)
        .map(|(id, labels)| (id.to_owned(), labels))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn trajectory(session: &str, text: &str) -> Value {
        json!({
            "schema_version": "ATIF-v1.6", "session_id": session,
            "agent": {"name": "reference", "version": "1", "model_name": "gpt-4o"},
            "steps": [{"step_id": 1, "source": "user", "message": text}],
        })
    }

    #[test]
    fn a_trajectory_of_another_agent_model_or_task_is_named() {
        let result = json!({"agent_info": {"name": "reference", "model_info": {"name": "gpt-4o", "provider": "openai"}}});
        let facts = facts_of(&trajectory("s1", "Write hello.txt\n\nAlso: be brief"));
        assert!(binding_problems(&facts, &result, Some("Write hello.txt\n")).is_empty());
        let other_task = binding_problems(&facts, &result, Some("Fix the bug"));
        assert_eq!(other_task.len(), 1, "{other_task:?}");
        let other = json!({"agent_info": {"name": "oracle", "model_info": {"name": "claude", "provider": "anthropic"}}});
        let problems = binding_problems(&facts, &other, None);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("\"oracle\""));
    }

    #[test]
    fn a_session_id_in_two_trials_repeats_whatever_their_steps() {
        let a = facts_of(&trajectory("task-1-5f0c", "one"));
        let b = facts_of(&trajectory("task-1-9e2d", "one"));
        let other_steps = facts_of(&trajectory("task-1-5f0c", "two"));
        let copy = a.clone();
        let repeated =
            repeated_sessions([("t1", &a), ("t2", &b), ("t3", &copy), ("t4", &other_steps)]);
        assert_eq!(
            repeated,
            vec![("task-1-5f0c".to_owned(), vec!["t1", "t3", "t4"])]
        );
    }
}
