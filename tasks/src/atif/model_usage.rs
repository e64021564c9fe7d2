//! Per-model token usage summed from a trajectory, as Harbor 0.26 backfills
//! `agent_result.model_usage` when the agent did not report it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::records::ModelUsage;

/// Sums each step's metrics by the model that produced the step: the step's own `model_name`,
/// else its trajectory's `agent.model_name`. Steps with neither, or without metrics, are
/// skipped; embedded `subagent_trajectories` count too. A model's cost is `None` when any of
/// its token-bearing steps has no cost, so a partial sum is never reported as the total.
/// Empty when no step can be attributed (Harbor then records `null`).
pub fn model_usage(trajectory: &Value) -> BTreeMap<String, ModelUsage> {
    let mut usage = BTreeMap::new();
    let mut unpriced = BTreeSet::new();
    add_trajectory(trajectory, &mut usage, &mut unpriced);
    for model in unpriced {
        if let Some(total) = usage.get_mut(&model) {
            total.cost_usd = None;
        }
    }
    usage
}

fn add_trajectory(
    trajectory: &Value,
    usage: &mut BTreeMap<String, ModelUsage>,
    unpriced: &mut BTreeSet<String>,
) {
    let root_model = trajectory
        .pointer("/agent/model_name")
        .and_then(Value::as_str);
    for step in trajectory
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let model = step
            .get("model_name")
            .and_then(Value::as_str)
            .or(root_model);
        let (Some(model), Some(metrics)) = (model, step.get("metrics").filter(|m| m.is_object()))
        else {
            continue;
        };
        let count = |key: &str| metrics.get(key).and_then(Value::as_u64).unwrap_or(0);
        let total = usage.entry(model.to_owned()).or_default();
        total.n_input_tokens += count("prompt_tokens");
        total.n_cache_tokens += count("cached_tokens");
        total.n_output_tokens += count("completion_tokens");
        match metrics.get("cost_usd").and_then(Value::as_f64) {
            Some(cost) => total.cost_usd = Some(total.cost_usd.unwrap_or(0.0) + cost),
            None if count("prompt_tokens") > 0 || count("completion_tokens") > 0 => {
                unpriced.insert(model.to_owned());
            }
            None => {}
        }
    }
    let subagents = trajectory
        .get("subagent_trajectories")
        .and_then(Value::as_array);
    for subagent in subagents.into_iter().flatten() {
        add_trajectory(subagent, usage, unpriced);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sums_by_step_model_falling_back_to_the_agents_and_counts_subagents() {
        let trajectory = json!({
            "agent": {"name": "a", "version": "1", "model_name": "root-model"},
            "steps": [
                {"step_id": 1, "source": "user", "message": "hi"},
                {"step_id": 2, "source": "agent", "message": "x",
                 "metrics": {"prompt_tokens": 100, "cached_tokens": 40, "completion_tokens": 10, "cost_usd": 0.5}},
                {"step_id": 3, "source": "agent", "message": "y", "model_name": "other",
                 "metrics": {"prompt_tokens": 7, "completion_tokens": 3, "cost_usd": 0.25}},
            ],
            "subagent_trajectories": [{
                "agent": {"name": "sub", "version": "1"},
                "steps": [{"step_id": 1, "source": "agent", "message": "z", "model_name": "root-model",
                           "metrics": {"prompt_tokens": 1, "completion_tokens": 1, "cost_usd": 0.25}}]
            }]
        });
        let usage = model_usage(&trajectory);
        assert_eq!(usage.len(), 2);
        let root = &usage["root-model"];
        assert_eq!(
            (
                root.n_input_tokens,
                root.n_cache_tokens,
                root.n_output_tokens
            ),
            (101, 40, 11)
        );
        assert_eq!(root.cost_usd, Some(0.75));
        assert_eq!(usage["other"].cost_usd, Some(0.25));
    }

    #[test]
    fn a_model_with_an_unpriced_token_step_has_no_cost_and_unattributed_steps_are_skipped() {
        let trajectory = json!({
            "agent": {"name": "a", "version": "1"},
            "steps": [
                {"step_id": 1, "source": "agent", "message": "x", "model_name": "m",
                 "metrics": {"prompt_tokens": 5, "cost_usd": 0.1}},
                {"step_id": 2, "source": "agent", "message": "y", "model_name": "m",
                 "metrics": {"completion_tokens": 2}},
                {"step_id": 3, "source": "agent", "message": "no model",
                 "metrics": {"prompt_tokens": 9, "cost_usd": 1.0}},
            ]
        });
        let usage = model_usage(&trajectory);
        assert_eq!(usage.keys().collect::<Vec<_>>(), ["m"]);
        assert_eq!(usage["m"].cost_usd, None);
        assert_eq!(usage["m"].n_output_tokens, 2);
        assert!(model_usage(&json!({"agent": {}, "steps": []})).is_empty());
    }
}
