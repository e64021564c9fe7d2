//! `[[verifier.collect]]` hooks (task schema 1.4, Harbor 0.26's `VerifierCollectConfig`):
//! commands run in a compose service after the agent phase ends and before artifacts are
//! collected, so a service can snapshot its runtime state (a database's contents, a counter)
//! into files that artifact entries then collect. Hooks on `main` run first, while the agent's
//! container runs; hooks on sidecars run after the main service's artifacts are collected.
//! Also the compose service name rule Harbor applies to hooks and to an artifact's `service`.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::config::UserSpec;

/// The agent's service in a compose task (Harbor's `MAIN_SERVICE_NAME`).
pub const MAIN_SERVICE: &str = "main";
/// Harbor's default deadline of one hook.
pub const DEFAULT_COLLECT_TIMEOUT_SEC: f64 = 60.0;

/// Harbor's `_COMPOSE_SERVICE_NAME_PATTERN`.
static SERVICE_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$").expect("service name pattern compiles")
});

/// One `[[verifier.collect]]` entry (also `[[steps.verifier.collect]]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct CollectHook {
    /// The shell command run in the service (`sh -c`).
    pub command: String,
    /// The compose service it runs in; `main` (the agent's container) by default.
    #[serde(default = "CollectHook::default_service")]
    pub service: String,
    /// Its deadline in seconds (Harbor passes the whole seconds to its exec).
    #[serde(default = "CollectHook::default_timeout")]
    pub timeout_sec: f64,
    /// The user it runs as; the service container's default user when unset.
    #[serde(default)]
    pub user: Option<UserSpec>,
}

impl CollectHook {
    fn default_service() -> String {
        MAIN_SERVICE.to_owned()
    }
    fn default_timeout() -> f64 {
        DEFAULT_COLLECT_TIMEOUT_SEC
    }

    /// True when the hook runs in the agent's container.
    pub fn on_main(&self) -> bool {
        self.service == MAIN_SERVICE
    }
}

/// Harbor's `_validate_compose_service_name`: the name trimmed, which must start with a letter
/// or digit and hold only letters, digits, `_`, `.` and `-`. Returns the trimmed name or the
/// problem, in Harbor's words.
pub fn check_service_name(value: &str) -> Result<String, String> {
    let trimmed = value.trim();
    if SERVICE_NAME.is_match(trimmed) {
        Ok(trimmed.to_owned())
    } else {
        Err(format!(
            "Invalid Docker Compose service name: {value:?}. Service names must start with an alphanumeric character and contain only alphanumeric characters, hyphens, underscores, and dots."
        ))
    }
}

/// The compose sidecars `config` refers to (collect hooks and artifacts of the task and of
/// its steps, `main` excluded), each with the first field naming it.
pub fn sidecar_references(config: &crate::TaskConfig) -> Vec<(String, String)> {
    use crate::config::Artifact;
    let mut found: Vec<(String, String)> = Vec::new();
    let mut note = |field: String, service: &str| {
        if service != MAIN_SERVICE && !found.iter().any(|(_, s)| s == service) {
            found.push((field, service.to_owned()));
        }
    };
    let artifacts = |prefix: &str, list: &[Artifact], note: &mut dyn FnMut(String, &str)| {
        for (i, artifact) in list.iter().enumerate() {
            if let Artifact::Spec {
                service: Some(service),
                ..
            } = artifact
            {
                note(format!("{prefix}[{i}].service"), service);
            }
        }
    };
    artifacts("artifacts", &config.artifacts, &mut note);
    for (i, hook) in config.verifier.collect.iter().enumerate() {
        note(format!("verifier.collect[{i}].service"), &hook.service);
    }
    for (s, step) in config.steps.iter().enumerate() {
        artifacts(&format!("steps[{s}].artifacts"), &step.artifacts, &mut note);
        for (i, hook) in step.verifier.collect.iter().enumerate() {
            note(
                format!("steps[{s}].verifier.collect[{i}].service"),
                &hook.service,
            );
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_follow_harbors_pattern() {
        assert_eq!(check_service_name(" db ").as_deref(), Ok("db"));
        assert_eq!(check_service_name("my_db.1-a").as_deref(), Ok("my_db.1-a"));
        for bad in ["", "-db", "_db", "db/x", "d b", ".db"] {
            assert!(check_service_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn defaults_are_harbors() {
        let hook: CollectHook = toml::from_str("command = \"true\"").unwrap();
        assert!(hook.on_main());
        assert_eq!(hook.timeout_sec, 60.0);
        assert_eq!(hook.user, None);
        let hook: CollectHook =
            toml::from_str("command = \"x\"\nservice = \"db\"\nuser = 999").unwrap();
        assert!(!hook.on_main());
        assert_eq!(hook.user, Some(UserSpec::Id(999)));
    }
}
