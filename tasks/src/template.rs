//! `${VAR}` and `${VAR:-default}` templates in task env tables, resolved from the host as
//! Harbor does, but only from the host variables the user names.
//!
//! A task is someone else's code: a template could otherwise pull any host variable (a
//! provider key, a cloud token) into its container. So a template reads only a variable the
//! job passes ([`HostVars`], from `--task-env-from NAME` or the job config's `task_env_from`);
//! any other is treated as unset (its default applies, else the task is refused naming the
//! flag). Every value drawn from the host goes through the secret check (`secrets`), and the
//! trial identity records it only as a keyed digest ([`HostVars::env_digest`]), so a published
//! record cannot be checked against guesses of a weak value.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use hmac::{KeyInit, Mac};
use regex::Regex;

use crate::digest::sha256_hex;

static TEMPLATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\$\{([^}:]+)(?::-(.*))?\}$").expect("template pattern compiles")
});

/// The file in a job dir holding the job's key for [`HostVars::env_digest`] (hex, mode 0600);
/// it never leaves the host: `runner scrub` leaves it out of published copies.
pub const KEY_FILE: &str = ".task-env-key";

/// A template that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template names a host variable the job does not pass to tasks, and has no default.
    #[error(
        "env {key} = \"${{{var}}}\" needs host variable {var}, which the job does not pass to tasks; pass --task-env-from {var} (or list it in the job config's task_env_from) if the task may read it, or write \"${{{var}:-default}}\""
    )]
    NotPassed {
        /// The env key whose value is the template.
        key: String,
        /// The host variable it names.
        var: String,
    },
    /// The job passes the variable, but it is unset on the host and the template has no default.
    #[error(
        "env {key} = \"${{{var}}}\" needs host variable {var}, which is unset; export it or write \"${{{var}:-default}}\""
    )]
    Unset {
        /// The env key whose value is the template.
        key: String,
        /// The host variable it names.
        var: String,
    },
    /// The host value looks like a credential (never shown).
    #[error(
        "env {key} = \"${{{var}}}\": the host's {var} would go into the task's container, but {reason}; \
         leave it out of --task-env-from, or pass --allow-container-secrets (the job is then recorded as not publishable)"
    )]
    Secret {
        /// The env key whose value is the template.
        key: String,
        /// The host variable it names.
        var: String,
        /// Why it counts as a credential.
        reason: &'static str,
    },
}

/// The host variables task env templates may read, captured once for a job, with whether
/// credentials may pass and the job's key for digests of drawn values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostVars {
    /// Each named variable and its host value (`None` when unset).
    values: BTreeMap<String, Option<String>>,
    allow_secrets: bool,
    /// The key of [`HostVars::env_digest`]; kept with the job so a resume computes the same.
    digest_key: Vec<u8>,
}

impl HostVars {
    /// No host variable: every template takes its default (the state of a task nobody ran).
    pub fn none() -> HostVars {
        HostVars::default()
    }

    /// The host's values of `names`, read now.
    pub fn from_host(names: &[String], allow_secrets: bool, digest_key: Vec<u8>) -> HostVars {
        let values = names
            .iter()
            .map(|name| (name.clone(), std::env::var(name).ok()))
            .collect();
        HostVars {
            values,
            allow_secrets,
            digest_key,
        }
    }

    /// Given values (for tests and recorded environments).
    pub fn with_values(
        values: BTreeMap<String, Option<String>>,
        allow_secrets: bool,
        digest_key: Vec<u8>,
    ) -> HostVars {
        HostVars {
            values,
            allow_secrets,
            digest_key,
        }
    }

    /// The key of [`HostVars::env_digest`].
    pub fn digest_key(&self) -> &[u8] {
        &self.digest_key
    }

    /// The names the job passes.
    pub fn names(&self) -> BTreeSet<&str> {
        self.values.keys().map(String::as_str).collect()
    }

    /// Resolves one value: a value that is wholly a template is replaced, any other is literal.
    /// The `bool` says whether the value came from the host.
    pub fn resolve_value(&self, key: &str, value: &str) -> Result<(String, bool), TemplateError> {
        let Some(caps) = TEMPLATE.captures(value) else {
            return Ok((value.to_owned(), false));
        };
        let var = &caps[1];
        let default = caps.get(2).map(|d| d.as_str().to_owned());
        let named = |key: &str, var: &str| (key.to_owned(), var.to_owned());
        match (self.values.get(var), default) {
            (Some(Some(found)), _) => {
                self.check_secret(key, var, found)?;
                Ok((found.clone(), true))
            }
            (_, Some(default)) => Ok((default, false)),
            (Some(None), None) => {
                let (key, var) = named(key, var);
                Err(TemplateError::Unset { key, var })
            }
            (None, None) => {
                let (key, var) = named(key, var);
                Err(TemplateError::NotPassed { key, var })
            }
        }
    }

    /// Refuses a host value that looks like a credential: by the task's key, by the host
    /// variable's name, by its shape, or because it holds one of the host's credentials.
    fn check_secret(&self, key: &str, var: &str, value: &str) -> Result<(), TemplateError> {
        if self.allow_secrets {
            return Ok(());
        }
        let reason = secrets::credential_reason(key, value)
            .or_else(|| secrets::credential_reason(var, value))
            .or_else(|| {
                secrets::host_credentials()
                    .iter()
                    .any(|(_, secret)| value.contains(secret.as_str()))
                    .then_some("its value holds one of the host's credentials")
            });
        match reason {
            Some(reason) => Err(TemplateError::Secret {
                key: key.to_owned(),
                var: var.to_owned(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// Resolves every value of `env`.
    pub fn resolve(&self, env: &BTreeMap<String, String>) -> Result<ResolvedEnv, TemplateError> {
        let mut resolved = ResolvedEnv::default();
        for (key, value) in env {
            let (value, drawn) = self.resolve_value(key, value)?;
            resolved.from_host |= drawn;
            resolved.env.insert(key.clone(), value);
        }
        Ok(resolved)
    }

    /// The digest a trial identity records of a resolved env: a plain `sha256:` of its JSON
    /// when every value is the task's own (literals and defaults, already public in
    /// `task.toml`, so identities of such tasks are unchanged), else `hmac-sha256:` keyed with
    /// the job's key, so a value drawn from the host cannot be guessed back from records.
    pub fn env_digest(&self, resolved: &ResolvedEnv) -> String {
        let json = serde_json::to_vec(&resolved.env).expect("a string map serialises");
        if !resolved.from_host {
            return format!("sha256:{}", sha256_hex(&json));
        }
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.digest_key)
            .expect("HMAC takes a key of any length");
        mac.update(&json);
        format!("hmac-sha256:{}", hex::encode(mac.finalize().into_bytes()))
    }
}

/// A resolved env table and whether any value came from the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedEnv {
    /// The values.
    pub env: BTreeMap<String, String>,
    /// True when a template drew a value from the host.
    pub from_host: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostVars {
        HostVars::with_values(
            BTreeMap::from([
                ("HOST_SET".to_owned(), Some("from-host".to_owned())),
                ("NAMED_UNSET".to_owned(), None),
            ]),
            false,
            b"key".to_vec(),
        )
    }

    /// Asserts that each `(value, expected)` resolves to `expected`.
    fn assert_resolves(cases: &[(&str, &str)]) {
        for (value, expected) in cases {
            assert_eq!(
                host().resolve_value("K", value).unwrap().0,
                *expected,
                "{value}"
            );
        }
    }

    #[test]
    fn whole_value_templates_resolve() {
        assert_resolves(&[
            ("${HOST_SET}", "from-host"),
            ("${HOST_SET:-fallback}", "from-host"),
            ("${UNSET:-fallback}", "fallback"),
            ("${NAMED_UNSET:-fallback}", "fallback"),
            ("${UNSET:-}", ""),
        ]);
    }

    #[test]
    fn partial_templates_stay_literal() {
        assert_resolves(&[
            ("prefix-${HOST_SET}", "prefix-${HOST_SET}"),
            ("/usr/bin:$PATH", "/usr/bin:$PATH"),
        ]);
    }

    #[test]
    fn only_named_variables_are_read() {
        // PATH is set on every host, but the job does not pass it.
        let err = host().resolve_value("P", "${PATH}").unwrap_err();
        assert_eq!(
            err,
            TemplateError::NotPassed {
                key: "P".into(),
                var: "PATH".into()
            }
        );
        assert!(err.to_string().contains("--task-env-from PATH"), "{err}");
        assert_eq!(
            host().resolve_value("P", "${PATH:-d}").unwrap(),
            ("d".into(), false)
        );
        let err = host().resolve_value("API", "${NAMED_UNSET}").unwrap_err();
        assert!(matches!(err, TemplateError::Unset { .. }), "{err}");
        assert!(err.to_string().contains("NAMED_UNSET"));
    }

    #[test]
    fn a_host_value_that_looks_like_a_credential_is_refused_unless_allowed() {
        let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";
        let values = |v: &str| BTreeMap::from([("V".to_owned(), Some(v.to_owned()))]);
        let strict = HostVars::with_values(values(key), false, Vec::new());
        let err = strict.resolve_value("PLAIN", "${V}").unwrap_err();
        assert!(matches!(err, TemplateError::Secret { .. }), "{err}");
        assert!(
            !err.to_string().contains(key),
            "the value is never shown: {err}"
        );
        // By the task's key name, too.
        let named = HostVars::with_values(values("abcdefgh12"), false, Vec::new());
        assert!(named.resolve_value("DB_PASSWORD", "${V}").is_err());
        let allowed = HostVars::with_values(values(key), true, Vec::new());
        assert_eq!(allowed.resolve_value("PLAIN", "${V}").unwrap().0, key);
    }

    #[test]
    fn digests_are_plain_for_the_tasks_own_values_and_keyed_for_host_values() {
        let env = BTreeMap::from([("A".to_owned(), "${HOST_SET}".to_owned())]);
        let literal = BTreeMap::from([("A".to_owned(), "from-host".to_owned())]);
        let drawn = host().resolve(&env).unwrap();
        let own = host().resolve(&literal).unwrap();
        assert!(drawn.from_host && !own.from_host);
        assert_eq!(drawn.env, own.env);
        let plain = host().env_digest(&own);
        assert_eq!(
            plain,
            format!("sha256:{}", sha256_hex(br#"{"A":"from-host"}"#))
        );
        let keyed = host().env_digest(&drawn);
        assert!(
            keyed.starts_with("hmac-sha256:") && !keyed.contains(&plain[7..]),
            "{keyed}"
        );
        // The same key gives the same digest (a resume), another key another one.
        assert_eq!(keyed, host().env_digest(&drawn));
        let other = HostVars::with_values(BTreeMap::new(), false, b"other".to_vec());
        assert_ne!(keyed, other.env_digest(&drawn));
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_case_2() {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
