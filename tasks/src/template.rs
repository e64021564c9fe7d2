//! `${VAR}` and `${VAR:-default}` templates in task env tables, resolved from the host as Harbor does.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

static TEMPLATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\$\{([^}:]+)(?::-(.*))?\}$").expect("template pattern compiles")
});

/// A template whose variable is unset on the host and has no default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "env {key} = \"${{{var}}}\" needs host variable {var}, which is unset; export it or write \"${{{var}:-default}}\""
)]
pub struct UnresolvedVar {
    /// The env key whose value is the template.
    pub key: String,
    /// The host variable it names.
    pub var: String,
}

/// Resolves one value: a value that is wholly a template is replaced, any other value is literal.
pub fn resolve_value(
    key: &str,
    value: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, UnresolvedVar> {
    let Some(caps) = TEMPLATE.captures(value) else {
        return Ok(value.to_owned());
    };
    let var = &caps[1];
    if let Some(found) = lookup(var) {
        return Ok(found);
    }
    match caps.get(2) {
        Some(default) => Ok(default.as_str().to_owned()),
        None => Err(UnresolvedVar {
            key: key.to_owned(),
            var: var.to_owned(),
        }),
    }
}

/// Resolves every value of `env` against the host environment.
pub fn resolve_env(
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, UnresolvedVar> {
    resolve_env_with(env, |name| std::env::var(name).ok())
}

/// Resolves every value of `env` with a custom lookup (for tests and for recorded environments).
pub fn resolve_env_with(
    env: &BTreeMap<String, String>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, UnresolvedVar> {
    env.iter()
        .map(|(k, v)| Ok((k.clone(), resolve_value(k, v, &lookup)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        (name == "HOST_SET").then(|| "from-host".to_owned())
    }

    /// Asserts that each `(value, expected)` resolves to `expected`.
    fn assert_resolves(cases: &[(&str, &str)]) {
        for (value, expected) in cases {
            assert_eq!(
                resolve_value("K", value, lookup).unwrap(),
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
    fn unset_without_default_names_key_and_variable() {
        let err = resolve_value("API", "${UNSET}", lookup).unwrap_err();
        assert_eq!(
            err,
            UnresolvedVar {
                key: "API".into(),
                var: "UNSET".into()
            }
        );
        assert!(err.to_string().contains("UNSET"));
    }
}
