//! Recognising credentials: names that look like credential variables and values shaped like
//! provider keys. Shared by the secret boundary, provenance, validation and scrub.

use std::sync::LazyLock;

use regex::Regex;

/// Provider key shapes: a prefix and enough key material that prose does not match.
static PROVIDER_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // \b keeps words such as "risk-free-..." or "task-..." from matching `sk-`.
        r"\b(?:sk-ant-[A-Za-z0-9_\-]{20,}",
        r"|sk-or-v1-[A-Za-z0-9]{20,}",
        r"|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}",
        r"|AIza[0-9A-Za-z_\-]{35}",
        r"|ghp_[A-Za-z0-9]{36}",
        r"|github_pat_[A-Za-z0-9_]{22,}",
        r"|hf_[A-Za-z0-9]{30,}",
        r"|AKIA[0-9A-Z]{16}",
        r"|xox[abprs]-[A-Za-z0-9\-]{10,})"
    ))
    .expect("provider key pattern compiles")
});

/// Variable names that conventionally hold credentials.
static CREDENTIAL_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:_API_KEY|_TOKEN|_SECRET|_SECRET_KEY|_ACCESS_KEY|_PASSWORD|^API_KEY|^TOKEN|^SECRET)$")
        .expect("credential name pattern compiles")
});

/// The regex of provider-key-shaped strings.
pub fn provider_key_pattern() -> &'static Regex {
    &PROVIDER_KEY
}

/// True when `value` contains a string shaped like a provider key.
pub fn looks_like_provider_key(value: &str) -> bool {
    PROVIDER_KEY.is_match(value)
}

/// True when an environment variable name conventionally holds a credential.
pub fn is_credential_name(name: &str) -> bool {
    CREDENTIAL_NAME.is_match(name)
}

/// Why an environment variable counts as a credential, if it does. Never mentions the value.
pub fn credential_reason(name: &str, value: &str) -> Option<&'static str> {
    if is_credential_name(name) && !value.is_empty() {
        Some("its name marks it as a credential")
    } else if looks_like_provider_key(value) {
        Some("its value is shaped like a provider API key")
    } else {
        None
    }
}

/// Values of host environment variables that look like credentials (at least 8 bytes long),
/// with their names, sorted by name.
pub fn host_credentials() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::env::vars()
        .filter(|(name, value)| value.len() >= 8 && credential_reason(name, value).is_some())
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_provider_key_shapes() {
        for key in [
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
            "sk-or-v1-0123456789abcdef0123456789abcdef",
            "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
            "github_pat_11ABCDEFG0123456789_abcdefghijkl",
            "hf_abcdefghijklmnopqrstuvwxyzABCDEF",
            "AKIAIOSFODNN7EXAMPLE",
        ] {
            assert!(looks_like_provider_key(key), "{key} should look like a key");
        }
        for prose in [
            "sk-learn is a library",
            "the risk-free rate",
            "risk-free-rate-calculation-for-portfolios",
            "disk-usage-analysis-report-generator",
            "AKIA",
            "hf_small",
            "ghp_short",
        ] {
            assert!(
                !looks_like_provider_key(prose),
                "{prose} should not look like a key"
            );
        }
    }

    #[test]
    fn recognises_credential_names() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "MY_SECRET",
            "DB_PASSWORD",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "TOKENIZERS_PARALLELISM", "MODEL_NAME"] {
            assert!(!is_credential_name(name), "{name}");
        }
        assert!(
            credential_reason("PLAIN", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345").is_some()
        );
        assert!(credential_reason("OPENAI_API_KEY", "").is_none());
    }
}
