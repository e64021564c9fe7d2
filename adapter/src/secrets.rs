//! The secret boundary: provider credentials stay out of task containers unless the user opts
//! in with `--allow-container-secrets` (which marks the job as not publishable).

use std::collections::BTreeMap;

use ::secrets::{credential_reason, is_sensitive_name};

/// The env bound for a container holds a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the environment variable {variable} would be passed into the task container, but {reason}; \
     remove it from the agent config's [env] / --agent-env, or pass --allow-container-secrets \
     (the job is then recorded as not publishable)"
)]
pub struct SecretBoundaryError {
    /// The variable's name (the value is never kept).
    pub variable: String,
    /// Why it counts as a credential.
    pub reason: &'static str,
}

/// Refuses `env` when any variable looks like a provider credential, by name or by value.
/// Checks in name order so the error is deterministic; names the first offending variable.
pub fn check_container_env(env: &BTreeMap<String, String>) -> Result<(), SecretBoundaryError> {
    for (name, value) in env {
        if let Some(reason) = credential_reason(name, value) {
            return Err(SecretBoundaryError {
                variable: name.clone(),
                reason,
            });
        }
    }
    Ok(())
}

/// The variables through which the LLM bridge gives a trial its endpoints and its token.
pub const BRIDGE_ENV_NAMES: [&str; 4] = [
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
];

/// [`check_container_env`] for a trial served by the LLM bridge: the bridge's own pairs pass
/// (one of [`BRIDGE_ENV_NAMES`] holding exactly `trial_token`, which is worthless outside this
/// trial), everything else is checked as usual, so a real provider key under the same names
/// is still refused.
pub fn check_container_env_with_bridge(
    env: &BTreeMap<String, String>,
    trial_token: &str,
) -> Result<(), SecretBoundaryError> {
    let others: BTreeMap<String, String> = env
        .iter()
        .filter(|(name, value)| {
            !(BRIDGE_ENV_NAMES.contains(&name.as_str())
                && !trial_token.is_empty()
                && value.as_str() == trial_token)
        })
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    check_container_env(&others)
}

/// The placeholder recorded instead of a sensitive value.
pub const REDACTED: &str = "<redacted>";

/// `env` with values that look sensitive replaced by [`REDACTED`], for records.
pub fn redact_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .map(|(name, value)| {
            let shown = if credential_reason(name, value).is_some() || is_sensitive_name(name) {
                REDACTED.to_owned()
            } else {
                value.clone()
            };
            (name.clone(), shown)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn refuses_credential_names_and_key_shaped_values_without_the_value() {
        let err = check_container_env(&env(&[("PATH", "/bin"), ("OPENAI_API_KEY", "abc12345")]))
            .unwrap_err();
        assert_eq!(err.variable, "OPENAI_API_KEY");
        assert!(!err.to_string().contains("abc12345"));
        let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";
        let err = check_container_env(&env(&[("HARMLESS", key)])).unwrap_err();
        assert_eq!(err.variable, "HARMLESS");
        assert!(!err.to_string().contains(key), "{err}");
        for (name, value) in [
            ("GH_TOKEN", "x1234567"),
            ("APP_SECRET", "x1234567"),
            ("A", "ghp_0123456789abcdefghijklmnopqrstuvwxyz"),
            ("B", "AKIAIOSFODNN7EXAMPLE"),
            ("C", "hf_abcdefghijklmnopqrstuvwxyzABCDEF"),
            ("D", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
            ("E", "sk-or-v1-0123456789abcdef0123456789abcdef"),
            ("F", "github_pat_11ABCDEFG0123456789_abcdefghijkl"),
        ] {
            assert!(
                check_container_env(&env(&[(name, value)])).is_err(),
                "{name}"
            );
        }
    }

    #[test]
    fn the_bridge_token_passes_and_real_keys_under_its_names_do_not() {
        let token = "runner-trial-0123456789abcdef0123456789abcdef0123456789abcdef";
        let bridged = env(&[
            ("OPENAI_API_KEY", token),
            ("ANTHROPIC_API_KEY", token),
            ("OPENAI_BASE_URL", "http://127.0.0.1:4141/v1"),
        ]);
        assert!(check_container_env_with_bridge(&bridged, token).is_ok());
        assert!(check_container_env(&bridged).is_err());
        let real = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123";
        let err =
            check_container_env_with_bridge(&env(&[("OPENAI_API_KEY", real)]), token).unwrap_err();
        assert_eq!(err.variable, "OPENAI_API_KEY");
        // The token under any other name is not the bridge's pair.
        let err =
            check_container_env_with_bridge(&env(&[("MY_API_KEY", token)]), token).unwrap_err();
        assert_eq!(err.variable, "MY_API_KEY");
        assert!(check_container_env_with_bridge(&env(&[("OPENAI_API_KEY", "")]), "").is_ok());
    }

    #[test]
    fn accepts_plain_env() {
        assert!(
            check_container_env(&env(&[
                ("MODEL", "gpt"),
                ("TOKENIZERS_PARALLELISM", "false")
            ]))
            .is_ok()
        );
    }

    #[test]
    fn redacts_sensitive_values_only() {
        let shown = redact_env(&env(&[
            ("MODEL", "gpt"),
            ("MY_API_KEY", "v"),
            ("X", "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        ]));
        assert_eq!(shown["MODEL"], "gpt");
        assert_eq!(shown["MY_API_KEY"], REDACTED);
        assert_eq!(shown["X"], REDACTED);
    }
}
