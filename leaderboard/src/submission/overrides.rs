//! The override rules over a job config or a trial config (docs/harbor-format.md §6.1 `no_job_overrides`,
//! §6.2 item 4): default timeout multiplier, no per-phase multipliers, no timeout or resource
//! overrides. Read from JSON values so Harbor's older shapes (no per-phase multipliers,
//! `orchestrator`) are accepted as they are.

use serde_json::Value;

/// Per-phase multipliers; any value, even 1.0, is an override (Harbor's rule).
const PHASE_MULTIPLIERS: [&str; 4] = [
    "agent_timeout_multiplier",
    "verifier_timeout_multiplier",
    "agent_setup_timeout_multiplier",
    "environment_build_timeout_multiplier",
];
const AGENT_FIELDS: [&str; 3] = [
    "override_timeout_sec",
    "override_setup_timeout_sec",
    "max_timeout_sec",
];
const VERIFIER_FIELDS: [&str; 2] = ["override_timeout_sec", "max_timeout_sec"];
const ENVIRONMENT_FIELDS: [&str; 4] = [
    "override_cpus",
    "override_memory_mb",
    "override_storage_mb",
    "override_gpus",
];

/// Every override in `config`, as `field path: problem` lines. A job config has `agents[]`, a
/// trial config a single `agent`.
pub fn overrides(config: &Value) -> Vec<String> {
    let mut found = Vec::new();
    match config.get("timeout_multiplier") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_f64() == Some(1.0) => {}
        Some(v) => found.push(format!(
            "timeout_multiplier is {v}; it must be 1.0 (or absent)"
        )),
    }
    for key in PHASE_MULTIPLIERS {
        non_null(config, key, key, &mut found);
    }
    if let Some(agents) = config.get("agents").and_then(Value::as_array) {
        for (i, agent) in agents.iter().enumerate() {
            for key in AGENT_FIELDS {
                non_null(agent, key, &format!("agents[{i}].{key}"), &mut found);
            }
        }
    }
    if let Some(agent) = config.get("agent") {
        for key in AGENT_FIELDS {
            non_null(agent, key, &format!("agent.{key}"), &mut found);
        }
    }
    if let Some(verifier) = config.get("verifier") {
        for key in VERIFIER_FIELDS {
            non_null(verifier, key, &format!("verifier.{key}"), &mut found);
        }
    }
    if let Some(environment) = config.get("environment") {
        for key in ENVIRONMENT_FIELDS {
            non_null(environment, key, &format!("environment.{key}"), &mut found);
        }
    }
    found
}

fn non_null(object: &Value, key: &str, path: &str, found: &mut Vec<String>) {
    if let Some(v) = object.get(key).filter(|v| !v.is_null()) {
        found.push(format!("{path} is {v}; it must be null"));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::overrides;

    #[test]
    fn defaults_and_absent_fields_pass() {
        assert!(
            overrides(&json!({"timeout_multiplier": 1.0, "agent_timeout_multiplier": null}))
                .is_empty()
        );
        assert!(overrides(&json!({"orchestrator": {"n_concurrent_trials": 4}})).is_empty());
    }

    #[test]
    fn every_override_is_named() {
        let config = json!({
            "timeout_multiplier": 2.0,
            "verifier_timeout_multiplier": 1.0,
            "agents": [{"name": "a", "max_timeout_sec": 100}],
            "agent": {"override_setup_timeout_sec": 5},
            "verifier": {"max_timeout_sec": 9},
            "environment": {"override_cpus": 4, "override_memory_mb": null}
        });
        let found = overrides(&config);
        assert_eq!(found.len(), 6, "{found:?}");
        assert!(found[0].starts_with("timeout_multiplier is 2.0"));
        assert!(
            found
                .iter()
                .any(|f| f.starts_with("agents[0].max_timeout_sec is 100"))
        );
        assert!(
            found
                .iter()
                .any(|f| f.starts_with("environment.override_cpus is 4"))
        );
    }
}
