//! Recognising credentials: names that look like credential variables, values shaped like
//! provider keys, the host's credential variables, and the one minimum length below which a
//! value is too likely to occur by chance to be treated as a secret.
//!
//! URLs given with credentials in them are redacted here too ([`redact_url_credentials`]).
//!
//! This is the only place these rules live. The adapter's secret boundary (what may enter a
//! container), provenance's known-secret check (what may be uploaded), and the leaderboard's
//! scrubber and submission rules (what may be published) all ask this crate, so a key shape
//! added here is refused, searched for and removed everywhere at once.

use std::sync::LazyLock;

use regex::Regex;

mod url;

pub use url::{REDACTED_USERINFO, has_url_credentials, redact_url_credentials};

/// Values shorter than this many characters are never treated as known secrets: searching for
/// them would flag ordinary text. Provenance skips them, the host credential list leaves them
/// out, and `runner scrub` refuses them unless `--allow-short` is given. Measured with
/// [`secret_len`].
pub const MIN_SECRET_LEN: usize = 8;

/// The length of a secret value as [`MIN_SECRET_LEN`] counts it: Unicode scalar values
/// (characters), so the figure matches what a user sees in an error message. Every real
/// credential is ASCII, where characters and bytes agree.
pub fn secret_len(value: &str) -> usize {
    value.chars().count()
}

/// True when `value` is at least [`MIN_SECRET_LEN`] characters long.
pub fn is_long_enough(value: &str) -> bool {
    secret_len(value) >= MIN_SECRET_LEN
}

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

/// The same provider key pattern over bytes, so binary and non-UTF-8 files can be scanned
/// without decoding. Compiled once from [`PROVIDER_KEY`]'s text, so the two never drift.
static PROVIDER_KEY_BYTES: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::Regex::new(PROVIDER_KEY.as_str())
        .expect("provider key pattern compiles for bytes")
});

/// The regex of provider-key-shaped strings, over `&str`.
pub fn provider_key_pattern() -> &'static Regex {
    &PROVIDER_KEY
}

/// The regex of provider-key-shaped strings, over bytes (for files that may not be UTF-8).
pub fn provider_key_bytes_pattern() -> &'static regex::bytes::Regex {
    &PROVIDER_KEY_BYTES
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

/// Names that suggest a secret even where [`is_credential_name`] is stricter (`AUTH`,
/// `PASSWD`, `CREDENTIALS`, `PRIVATE_KEY`, `SESSION_COOKIE`…). Too broad to refuse a variable
/// on, but right for deciding what to hide in a record.
pub fn is_sensitive_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "AUTH",
        "CREDENTIAL",
        "COOKIE",
        "SESSION",
    ]
    .iter()
    .any(|word| upper.contains(word))
}

/// The `(name, value)` pairs of `vars` that hold credentials (by [`credential_reason`]) and are
/// at least [`MIN_SECRET_LEN`] long, sorted by name: the values to search uploads for.
pub fn credentials(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, value)| is_long_enough(value) && credential_reason(name, value).is_some())
        .collect();
    found.sort();
    found
}

/// The host environment's credential variables, as [`credentials`] selects them.
pub fn host_credentials() -> Vec<(String, String)> {
    credentials(std::env::vars())
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

    #[test]
    fn the_bytes_pattern_is_the_str_pattern() {
        assert_eq!(
            provider_key_bytes_pattern().as_str(),
            provider_key_pattern().as_str()
        );
        assert!(provider_key_bytes_pattern().is_match(b"\xff hf_abcdefghijklmnopqrstuvwxyzABCDEF"));
    }

    #[test]
    fn minimum_length_counts_characters() {
        assert!(!is_long_enough("1234567"));
        assert!(is_long_enough("12345678"));
        // Four characters, eight bytes: too short.
        assert!(!is_long_enough("\u{e9}\u{e9}\u{e9}\u{e9}"));
        assert_eq!(secret_len("\u{e9}\u{e9}"), 2);
    }

    #[test]
    fn credentials_keeps_long_credential_values_sorted() {
        let vars = [
            ("Z_TOKEN", "long-enough-value"),
            ("A_API_KEY", "another-long-value"),
            ("SHORT_TOKEN", "abc"),
            ("PATH", "/usr/local/bin:/usr/bin"),
            ("PLAIN", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345"),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()));
        let names: Vec<String> = credentials(vars).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["A_API_KEY", "PLAIN", "Z_TOKEN"]);
    }

    #[test]
    fn sensitive_names_are_broader_than_credential_names() {
        for name in [
            "AUTH",
            "PASSWD",
            "DB_CREDENTIALS",
            "PRIVATE_KEY",
            "session_cookie",
        ] {
            assert!(is_sensitive_name(name), "{name}");
        }
        assert!(!is_sensitive_name("MODEL"));
    }
}
