//! One trajectory for a multi-step trial: each step's agent run writes its own ATIF file
//! (`steps/<name>/agent/trajectory.json`, as in Harbor); the trial's `agent/trajectory.json`
//! joins them in step order so a reader of the trial (a leaderboard, the viewer) sees every
//! step. Step ids are renumbered from 1, the final metrics summed, and root `extra.steps`
//! says which ids each step covers. The joined file is only written when it validates.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::bounded::{MAX_TRAJECTORY_BYTES, read_capped};

/// Why no joined trajectory was made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JoinError {
    /// No step wrote a trajectory.
    #[error("no step wrote a trajectory")]
    Empty,
    /// A step's file could not be read or parsed, or is over the size cap.
    #[error("step {step:?}: {message}")]
    Unreadable {
        /// The step's name.
        step: String,
        /// What went wrong.
        message: String,
    },
    /// The steps use different ATIF versions.
    #[error("the steps' trajectories use different ATIF versions ({0} and {1})")]
    Versions(String, String),
    /// The joined trajectory does not validate (the first error).
    #[error("the joined trajectory is not valid ATIF: {0}")]
    Invalid(String),
}

/// Joins the trajectories `(step name, ATIF value)` in order; see the module docs.
pub fn join(steps: &[(String, Value)]) -> Result<Value, JoinError> {
    let (_, first) = steps.first().ok_or(JoinError::Empty)?;
    let version = first["schema_version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut joined_steps = Vec::new();
    let mut ranges = Vec::new();
    let mut notes = Vec::new();
    let mut totals: Map<String, Value> = Map::new();
    for (name, trajectory) in steps {
        let other = trajectory["schema_version"].as_str().unwrap_or_default();
        if other != version {
            return Err(JoinError::Versions(version, other.to_owned()));
        }
        let first_id = joined_steps.len() + 1;
        for step in trajectory["steps"].as_array().into_iter().flatten() {
            let mut step = step.clone();
            step["step_id"] = json!(joined_steps.len() + 1);
            joined_steps.push(step);
        }
        ranges.push(json!({
            "name": name,
            "session_id": trajectory["session_id"],
            "first_step_id": first_id,
            "last_step_id": joined_steps.len(),
        }));
        if let Some(note) = trajectory["notes"].as_str() {
            notes.push(format!("{name}: {note}"));
        }
        if let Some(metrics) = trajectory["final_metrics"].as_object() {
            add_metrics(&mut totals, metrics);
        }
    }
    let mut joined = json!({
        "schema_version": version,
        "session_id": first["session_id"],
        "agent": first["agent"],
        "steps": joined_steps,
    });
    if !notes.is_empty() {
        joined["notes"] = json!(notes.join("\n"));
    }
    if !totals.is_empty() {
        totals.insert(
            "total_steps".into(),
            json!(joined["steps"].as_array().map_or(0, Vec::len)),
        );
        joined["final_metrics"] = Value::Object(totals);
    }
    joined["extra"] = json!({ "steps": ranges });
    match crate::atif::validate_value(&joined).first() {
        None => Ok(joined),
        Some(error) => Err(JoinError::Invalid(error.to_string())),
    }
}

/// Sums the numeric final metrics (`total_steps` is recounted by the caller).
fn add_metrics(totals: &mut Map<String, Value>, metrics: &Map<String, Value>) {
    for (key, value) in metrics {
        if key == "total_steps" || key == "extra" {
            continue;
        }
        let sum = match (totals.get(key).and_then(Value::as_f64), value.as_f64()) {
            (Some(a), Some(b)) if value.is_u64() && totals[key].is_u64() => {
                json!(a as u64 + b as u64)
            }
            (Some(a), Some(b)) => json!(a + b),
            (None, Some(_)) => value.clone(),
            _ => continue,
        };
        totals.insert(key.clone(), sum);
    }
}

/// Reads `steps/<name>/agent/trajectory.json` of each of `names` under `trial_dir` (steps
/// without one are left out) and joins them; together they may not exceed the trajectory cap.
pub fn join_files(trial_dir: &Path, names: &[String]) -> Result<Value, JoinError> {
    let mut steps = Vec::new();
    let mut total = 0u64;
    for name in names {
        let path = trial_dir
            .join("steps")
            .join(name)
            .join("agent/trajectory.json");
        if !path.is_file() {
            continue;
        }
        let unreadable = |message: String| JoinError::Unreadable {
            step: name.clone(),
            message,
        };
        let cap = MAX_TRAJECTORY_BYTES.saturating_sub(total);
        let bytes = read_capped(&path, cap, "trajectory").map_err(|e| unreadable(e.to_string()))?;
        total += bytes.len() as u64;
        let value = serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string()))?;
        steps.push((name.clone(), value));
    }
    join(&steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trajectory(session: &str, messages: &[&str], tokens: u64) -> Value {
        let steps: Vec<Value> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| json!({"step_id": i + 1, "source": if i == 0 { "user" } else { "agent" }, "message": m}))
            .collect();
        json!({
            "schema_version": "ATIF-v1.6",
            "session_id": session,
            "agent": {"name": "a", "version": "1"},
            "steps": steps,
            "notes": "done",
            "final_metrics": {"total_prompt_tokens": tokens, "total_cost_usd": 0.5, "total_steps": messages.len()},
        })
    }

    #[test]
    fn steps_are_joined_in_order_with_renumbered_ids_and_summed_metrics() {
        let joined = join(&[
            ("draft".into(), trajectory("t1", &["do a", "did a"], 10)),
            (
                "final".into(),
                trajectory("t2", &["do b", "did b", "more"], 5),
            ),
        ])
        .unwrap();
        let ids: Vec<u64> = joined["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["step_id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, [1, 2, 3, 4, 5]);
        assert_eq!(joined["steps"][2]["message"], "do b");
        assert_eq!(joined["final_metrics"]["total_prompt_tokens"], 15);
        assert_eq!(joined["final_metrics"]["total_cost_usd"], 1.0);
        assert_eq!(joined["final_metrics"]["total_steps"], 5);
        assert_eq!(
            joined["extra"]["steps"][1],
            json!({"name": "final", "session_id": "t2", "first_step_id": 3, "last_step_id": 5})
        );
        assert_eq!(joined["notes"], "draft: done\nfinal: done");
        assert!(crate::atif::validate_value(&joined).is_empty());
    }

    #[test]
    fn nothing_to_join_or_mixed_versions_are_errors() {
        assert_eq!(join(&[]), Err(JoinError::Empty));
        let mut other = trajectory("t2", &["x"], 1);
        other["schema_version"] = json!("ATIF-v1.5");
        let err = join(&[
            ("a".into(), trajectory("t1", &["x"], 1)),
            ("b".into(), other),
        ]);
        assert!(matches!(err, Err(JoinError::Versions(..))), "{err:?}");
        let broken = json!({"schema_version": "ATIF-v1.6", "steps": []});
        assert!(matches!(
            join(&[("a".into(), broken)]),
            Err(JoinError::Invalid(_))
        ));
    }
}
