//! The set of known secret values to remove, gathered from flags and files and validated.

use std::fmt;
use std::path::Path;

use ::secrets::{MIN_SECRET_LEN, secret_len};

use super::error::ScrubError;
use super::load;

/// One known secret: a display name and its value. `Debug` never shows the value.
#[derive(Clone)]
pub struct Secret {
    /// Name printed in markers and the report, e.g. `OPENAI_API_KEY`.
    pub name: String,
    /// The value's bytes.
    pub value: Vec<u8>,
    /// Where it came from (`--secret`, a file path…), for messages.
    pub origin: String,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_without_value(f, "Secret", &self.name, &self.origin)
    }
}

/// A validated, de-duplicated list of secrets.
#[derive(Debug, Clone, Default)]
pub struct SecretSet {
    /// The secrets, in the order given.
    pub secrets: Vec<Secret>,
    /// Names of file entries skipped as obviously not secret (`true`, `0`…), for the report.
    pub skipped_benign: Vec<String>,
}

/// Collects candidate secrets from flags and files, then validates them in [`SecretSetBuilder::build`].
#[derive(Debug, Default)]
pub struct SecretSetBuilder {
    allow_short: bool,
    candidates: Vec<Candidate>,
    skipped_benign: Vec<String>,
}

/// A not-yet-validated entry.
#[derive(Clone)]
pub(crate) struct Candidate {
    pub name: String,
    pub value: String,
    pub origin: String,
    /// Names from files are normalised; names from flags must already be valid.
    pub from_file: bool,
}

impl fmt::Debug for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_without_value(f, "Candidate", &self.name, &self.origin)
    }
}

/// The `Debug` of a named secret, which shows its name and origin and never its value.
fn debug_without_value(
    f: &mut fmt::Formatter<'_>,
    kind: &str,
    name: &str,
    origin: &str,
) -> fmt::Result {
    f.debug_struct(kind)
        .field("name", &name)
        .field("origin", &origin)
        .finish_non_exhaustive()
}

impl SecretSetBuilder {
    /// A builder; `allow_short` accepts values shorter than [`MIN_SECRET_LEN`] characters.
    pub fn new(allow_short: bool) -> Self {
        Self {
            allow_short,
            ..Self::default()
        }
    }

    /// Adds a `NAME=VALUE` pair (or bare `NAME`, read from the environment) given to `flag`.
    /// `index` is the 1-based position among that flag's arguments, used in messages.
    pub fn add_pair(
        &mut self,
        flag: &'static str,
        index: usize,
        arg: &str,
    ) -> Result<(), ScrubError> {
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name.to_string(), value.to_string()),
            None => {
                let value = std::env::var(arg).map_err(|_| ScrubError::EnvMissing {
                    flag,
                    name: arg.to_string(),
                })?;
                (arg.to_string(), value)
            }
        };
        if name.is_empty() {
            return Err(ScrubError::BadPair { flag, index });
        }
        self.candidates.push(Candidate {
            name,
            value,
            origin: format!("{flag} #{index}"),
            from_file: false,
        });
        Ok(())
    }

    /// Adds every secret of a `.env`-style or JSON settings file.
    pub fn add_file(&mut self, path: &Path) -> Result<(), ScrubError> {
        let loaded = load::load_file(path)?;
        self.candidates.extend(loaded.candidates);
        self.skipped_benign.extend(loaded.skipped_benign);
        Ok(())
    }

    /// Validates names and lengths, drops duplicate values, and gives repeated names a suffix.
    pub fn build(self) -> Result<SecretSet, ScrubError> {
        let mut secrets: Vec<Secret> = Vec::new();
        for candidate in self.candidates {
            let name = if candidate.from_file {
                normalise_name(&candidate.name)
            } else {
                candidate.name.clone()
            };
            if !is_valid_name(&name) {
                return Err(ScrubError::BadName {
                    name: candidate.name,
                    origin: candidate.origin,
                });
            }
            let len = secret_len(&candidate.value);
            if len == 0 {
                continue;
            }
            if len < MIN_SECRET_LEN && !self.allow_short {
                return Err(ScrubError::TooShort {
                    name,
                    origin: candidate.origin,
                    len,
                    min: MIN_SECRET_LEN,
                });
            }
            let value = candidate.value.into_bytes();
            // The same value under two names is one secret; the first name wins.
            if secrets.iter().any(|s| s.value == value) {
                continue;
            }
            let name = unique_name(&secrets, name);
            secrets.push(Secret {
                name,
                value,
                origin: candidate.origin,
            });
        }
        if secrets.is_empty() {
            return Err(ScrubError::NoSecrets);
        }
        Ok(SecretSet {
            secrets,
            skipped_benign: self.skipped_benign,
        })
    }
}

/// True for names usable in a marker: ASCII letters, digits and `_`, not starting with a digit.
fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Turns a settings key such as `apiKey` or `openai.api-key` into `APIKEY` / `OPENAI_API_KEY`.
fn normalise_name(key: &str) -> String {
    let mut name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

/// `name`, or `name_2`, `name_3`… when an earlier secret already uses it.
fn unique_name(secrets: &[Secret], name: String) -> String {
    if !secrets.iter().any(|s| s.name == name) {
        return name;
    }
    (2..)
        .map(|n| format!("{name}_{n}"))
        .find(|candidate| !secrets.iter().any(|s| &s.name == candidate))
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_short_values_unless_allowed() {
        let mut b = SecretSetBuilder::new(false);
        b.add_pair("--secret", 1, "PIN=1234").unwrap();
        let err = b.build().unwrap_err();
        assert!(matches!(err, ScrubError::TooShort { len: 4, .. }));
        assert!(
            !err.to_string().contains("1234"),
            "messages never show values"
        );
        let mut b = SecretSetBuilder::new(true);
        b.add_pair("--secret", 1, "PIN=1234").unwrap();
        assert_eq!(b.build().unwrap().secrets.len(), 1);
    }

    #[test]
    fn dedups_values_and_suffixes_repeated_names() {
        let mut b = SecretSetBuilder::new(false);
        b.add_pair("--secret", 1, "A=value-one-long").unwrap();
        b.add_pair("--secret", 2, "B=value-one-long").unwrap();
        b.add_pair("--secret", 3, "A=value-two-long").unwrap();
        let set = b.build().unwrap();
        let names: Vec<_> = set.secrets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["A", "A_2"]);
    }

    #[test]
    fn rejects_bad_names_and_missing_values() {
        let mut b = SecretSetBuilder::new(false);
        assert!(matches!(
            b.add_pair("--secret", 1, "=abcdefghij"),
            Err(ScrubError::BadPair { index: 1, .. })
        ));
        b.add_pair("--secret", 2, "BAD NAME=abcdefghijk").unwrap();
        assert!(matches!(b.build(), Err(ScrubError::BadName { .. })));
        let mut b = SecretSetBuilder::new(false);
        let err = b
            .add_pair("--env-passthrough", 1, "SCRUB_TEST_SURELY_UNSET_VAR")
            .unwrap_err();
        assert!(matches!(err, ScrubError::EnvMissing { .. }));
        assert!(matches!(
            SecretSetBuilder::new(false).build(),
            Err(ScrubError::NoSecrets)
        ));
    }

    #[test]
    fn debug_never_shows_values() {
        let s = Secret {
            name: "N".into(),
            value: b"hunter2hunter2".to_vec(),
            origin: "x".into(),
        };
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
