//! Content-addressed trial identity: a trial is its task's content, the agent (config, version,
//! source, instruction suffix), the environment and verifier settings, the multipliers, the
//! task's resolved env, and which of the task's k trials it is. The trial's name is derived
//! from that key, so a resumed job finds each planned trial's directory by name, and a trial
//! run with anything different gets another name (and is refused by the resume check).

use std::collections::BTreeMap;

use adapter::{Agent, AnyAgent};
use serde_json::Value;
use tasks::Task;
use tasks::digest::sha256_hex;
use tasks::records::{AgentConfig, TrialConfig, TrialIdentity};

/// What the agent under test is, beyond its recorded config.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFingerprint {
    /// `agents[]` as recorded (name, model, kwargs, redacted env).
    pub config: AgentConfig,
    /// The version known before setup.
    pub version: String,
    /// `sha256:<hex>` of an installed agent's uploaded source tar.
    pub source: Option<String>,
    /// `sha256:<hex>` of the instruction suffix, if any.
    pub instruction_suffix: Option<String>,
}

impl AgentFingerprint {
    /// The fingerprint of `agent`.
    pub fn of(agent: &AnyAgent) -> AgentFingerprint {
        let source = match agent {
            AnyAgent::Installed(installed) => Some(format!(
                "sha256:{}",
                installed.source_provenance().tar_sha256()
            )),
            AnyAgent::Command(command) => Some(command.commands_digest()),
            _ => None,
        };
        AgentFingerprint {
            config: agent.job_config(),
            version: agent.version(),
            source,
            instruction_suffix: agent
                .instruction_suffix()
                .map(|s| format!("sha256:{}", sha256_hex(s.as_bytes()))),
        }
    }
}

/// The identity of trial `index` of `task` with `config` (task ref, agent, environment,
/// verifier and multipliers are read from it) and `task_env`, the digest of the task's
/// resolved env ([`tasks::template::HostVars::env_digest`]: keyed when a value came from the
/// host, so the record cannot be checked against guesses of it).
pub fn trial_identity(
    task: &Task,
    config: &TrialConfig,
    agent: &AgentFingerprint,
    task_env: &str,
    index: u32,
) -> TrialIdentity {
    let mut identity = TrialIdentity {
        key: String::new(),
        index,
        agent_version: agent.version.clone(),
        agent_source: agent.source.clone(),
        instruction_suffix: agent.instruction_suffix.clone(),
        task_env: task_env.to_owned(),
    };
    identity.key = format!(
        "sha256:{}",
        sha256_hex(canonical(&key_input(task.digest.as_str(), config, &identity)).as_bytes())
    );
    identity
}

/// Everything the key covers, as one JSON object. `force_build` is left out: rebuilding an
/// image of the same content does not make another trial.
fn key_input(task_digest: &str, config: &TrialConfig, identity: &TrialIdentity) -> Value {
    serde_json::json!({
        "task": task_digest,
        "agent": agent_without_026_defaults(config),
        "agent_version": identity.agent_version,
        "agent_source": identity.agent_source,
        "instruction_suffix": identity.instruction_suffix,
        "environment": environment_without_force_build(config),
        "verifier": config.verifier,
        "multipliers": config.multipliers,
        "limits": limits_without_enforcement(config),
        "task_env": identity.task_env,
        "index": identity.index,
    })
}

/// The trial's limits without how `storage_mb` is enforced (the backend learns that while the
/// trial starts; the limit itself is what defines the trial).
fn limits_without_enforcement(config: &TrialConfig) -> Value {
    let mut limits = value(&config.limits);
    if let Some(map) = limits.as_object_mut() {
        map.remove("storage_enforcement");
    }
    limits
}

fn environment_without_force_build(config: &TrialConfig) -> Value {
    let mut environment = value(&config.environment);
    if let Some(map) = environment.as_object_mut() {
        map.remove("force_build");
        // Harbor 0.26's additions (always their defaults here) were added after trials had
        // names: leaving them out keeps every trial's name what it was.
        for key in tasks::records::ENVIRONMENT_026_KEYS {
            map.remove(key);
        }
    }
    environment
}

/// The agent's config without Harbor 0.26's additions (see [`environment_without_force_build`]).
fn agent_without_026_defaults(config: &TrialConfig) -> Value {
    let mut agent = value(&config.agent);
    if let Some(map) = agent.as_object_mut() {
        for key in tasks::records::AGENT_026_KEYS {
            map.remove(key);
        }
    }
    agent
}

/// JSON text with every object's keys sorted, so the key does not depend on field order.
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value)).expect("JSON values serialise")
}

/// A field the resume check compares: its name in the message, and how to read it as JSON.
type Compared<T> = (&'static str, fn(&T) -> Value);

/// What differs between the identity of an existing trial (`old`, from its config.json) and
/// the planned trial of the same task and index (`new`), one line per field, for the message
/// that refuses a resume.
pub fn identity_differences(old: &TrialConfig, new: &TrialConfig) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = |name: &str, a: Value, b: Value| {
        for (path, was, now) in json_differences(name, &a, &b) {
            out.push(format!("{path}: {was} in the job, {now} now"));
        }
    };
    let config_fields: [Compared<TrialConfig>; 5] = [
        ("task ref", |c| value(&c.task.reference)),
        ("agent", agent_without_026_defaults),
        ("environment", environment_without_force_build),
        ("verifier", |c| value(&c.verifier)),
        ("multipliers", |c| value(&c.multipliers)),
    ];
    for (name, of) in config_fields {
        field(name, of(old), of(new));
    }
    match (&old.identity, &new.identity) {
        (Some(a), Some(b)) => {
            let identity_fields: [Compared<TrialIdentity>; 4] = [
                ("agent version", |i| value(&i.agent_version)),
                ("agent source (uploaded tar)", |i| value(&i.agent_source)),
                ("instruction suffix", |i| value(&i.instruction_suffix)),
                ("the task's resolved [environment].env", |i| {
                    value(&i.task_env)
                }),
            ];
            for (name, of) in identity_fields {
                field(name, of(a), of(b));
            }
        }
        (None, _) => out.push(
            "the trial records no identity (written by another tool or an older runner)".into(),
        ),
        (Some(_), None) => {}
    }
    out
}

/// A record field as JSON (records always serialise).
fn value<T: serde::Serialize>(field: &T) -> Value {
    serde_json::to_value(field).expect("records serialise")
}

/// Leaf paths where `a` and `b` differ (`agent.kwargs.reasoning_effort`), with both values
/// shown short.
pub fn json_differences(prefix: &str, a: &Value, b: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    diff_into(prefix, a, b, &mut out);
    out
}

fn diff_into(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, String, String)>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let null = Value::Null;
                diff_into(
                    &format!("{path}.{key}"),
                    x.get(key).unwrap_or(&null),
                    y.get(key).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (a, b)) in x.iter().zip(y).enumerate() {
                diff_into(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ => out.push((path.to_owned(), short(a), short(b))),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(77).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_ignores_key_order() {
        let a = serde_json::json!({"b": 1, "a": {"y": 2, "x": [3, {"q": 1, "p": 2}]}});
        let b = serde_json::json!({"a": {"x": [3, {"p": 2, "q": 1}], "y": 2}, "b": 1});
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            canonical(&a),
            r#"{"a":{"x":[3,{"p":2,"q":1}],"y":2},"b":1}"#
        );
    }

    #[test]
    fn differences_name_leaf_paths() {
        let a = serde_json::json!({"kwargs": {"reasoning_effort": "none"}, "name": "x"});
        let b = serde_json::json!({"kwargs": {"reasoning_effort": "high"}, "name": "x"});
        assert_eq!(
            json_differences("agent", &a, &b),
            vec![(
                "agent.kwargs.reasoning_effort".to_owned(),
                "\"none\"".to_owned(),
                "\"high\"".to_owned()
            )]
        );
        let a = serde_json::json!([{"name": "oracle"}]);
        let b = serde_json::json!([{"name": "nop"}]);
        assert_eq!(json_differences("agents", &a, &b)[0].0, "agents[0].name");
    }
}
