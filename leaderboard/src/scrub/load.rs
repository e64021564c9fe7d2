//! Reading secrets from `--secrets-from` files: `.env`-style files and JSON settings files.

use std::path::Path;

use serde_json::Value;

use super::error::ScrubError;
use super::secrets::Candidate;

/// What one file contributed.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// Entries to validate as secrets.
    pub candidates: Vec<Candidate>,
    /// Names whose values are plainly not secret (`true`, `0`…) and were skipped.
    pub skipped_benign: Vec<String>,
}

/// Largest `--secrets-from` file read: `.env` and settings files are a few KB, and a mistaken
/// path (a log, `/dev/zero`) must not be read whole.
pub(crate) const MAX_SECRETS_FILE_BYTES: u64 = 4 << 20;

/// Loads a file: JSON when it starts with `{`, otherwise `.env` lines.
pub(crate) fn load_file(path: &Path) -> Result<Loaded, ScrubError> {
    let read_error = |source| ScrubError::SecretsFileRead {
        path: path.to_path_buf(),
        source,
    };
    let bytes = tasks::bounded::read_capped(path, MAX_SECRETS_FILE_BYTES, "secrets file")
        .map_err(read_error)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not UTF-8 text",
        ))
    })?;
    let origin = path.display().to_string();
    let mut loaded = Loaded::default();
    if text.trim_start().starts_with('{') {
        let value: Value = serde_json::from_str(&text).map_err(|e| ScrubError::SecretsFile {
            path: path.to_path_buf(),
            // serde_json messages carry positions only, never the offending text.
            reason: format!("not valid JSON ({e})"),
        })?;
        collect_json(&value, &origin, &mut loaded);
    } else {
        parse_env(&text, path, &origin, &mut loaded)?;
    }
    Ok(loaded)
}

/// Values that configure rather than authenticate; scrubbing them would redact ordinary text.
fn is_benign(value: &str) -> bool {
    matches!(
        value.to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "none" | "0" | "1"
    )
}

fn push(loaded: &mut Loaded, name: &str, value: &str, origin: &str) {
    if value.is_empty() {
        return;
    }
    if is_benign(value) {
        loaded.skipped_benign.push(name.to_string());
        return;
    }
    loaded.candidates.push(Candidate {
        name: name.to_string(),
        value: value.to_string(),
        origin: origin.to_string(),
        from_file: true,
    });
}

/// Parses `[export ]NAME=VALUE` lines with `#` comments and optional quotes.
fn parse_env(text: &str, path: &Path, origin: &str, loaded: &mut Loaded) -> Result<(), ScrubError> {
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            return Err(ScrubError::SecretsFile {
                path: path.to_path_buf(),
                reason: format!("line {}: expected NAME=VALUE", number + 1),
            });
        };
        let name = name.trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(ScrubError::SecretsFile {
                path: path.to_path_buf(),
                reason: format!(
                    "line {}: expected NAME=VALUE with a name before `=`",
                    number + 1
                ),
            });
        }
        push(
            loaded,
            name,
            &unquote(value.trim()),
            &format!("{origin} line {}", number + 1),
        );
    }
    Ok(())
}

/// Strips matching surrounding quotes, or an unquoted value's trailing ` # comment`.
fn unquote(value: &str) -> String {
    for quote in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote) {
            return value[1..value.len() - 1].to_string();
        }
    }
    match value.find(" #") {
        Some(at) => value[..at].trim_end().to_string(),
        None => value.to_string(),
    }
}

/// True for JSON keys that conventionally hold credentials (`apiKey`, `auth_token`, `password`…).
fn is_credential_key(key: &str) -> bool {
    if ::secrets::is_credential_name(key) {
        return true;
    }
    let squashed: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_lowercase();
    squashed == "key"
        || [
            "apikey",
            "token",
            "secret",
            "secretkey",
            "password",
            "passwd",
            "credential",
            "credentials",
        ]
        .iter()
        .chain(&[
            "privatekey",
            "accesskey",
            "authorization",
            "auth",
            "bearer",
            "cookie",
        ])
        .any(|suffix| squashed.ends_with(suffix))
}

/// Collects strings under credential-like keys, every string of an `env` block, and any
/// provider-key-shaped string wherever it sits.
fn collect_json(value: &Value, origin: &str, loaded: &mut Loaded) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key.eq_ignore_ascii_case("env")
                    && let Value::Object(env) = child
                {
                    for (name, v) in env {
                        match v {
                            Value::String(s) => {
                                push(loaded, name, s, &format!("{origin} env.{name}"))
                            }
                            other => collect_json(other, origin, loaded),
                        }
                    }
                } else if is_credential_key(key) {
                    collect_strings(child, key, origin, loaded);
                } else if let Value::String(s) = child {
                    if ::secrets::looks_like_provider_key(s) {
                        push(loaded, key, s, &format!("{origin} key {key}"));
                    }
                } else {
                    collect_json(child, origin, loaded);
                }
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| collect_json(item, origin, loaded)),
        Value::String(s) if ::secrets::looks_like_provider_key(s) => {
            push(loaded, "SECRET", s, &format!("{origin} array item"))
        }
        _ => {}
    }
}

/// Every string leaf below a credential-like key, named after that key.
fn collect_strings(value: &Value, key: &str, origin: &str, loaded: &mut Loaded) {
    match value {
        Value::String(s) => push(loaded, key, s, &format!("{origin} key {key}")),
        Value::Array(items) => items
            .iter()
            .for_each(|item| collect_strings(item, key, origin, loaded)),
        Value::Object(map) => map
            .values()
            .for_each(|item| collect_strings(item, key, origin, loaded)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, ext: &str) -> Result<Loaded, ScrubError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("f.{ext}"));
        std::fs::write(&path, text).unwrap();
        load_file(&path)
    }

    fn names_values(loaded: &Loaded) -> Vec<(String, String)> {
        loaded
            .candidates
            .iter()
            .map(|c| (c.name.clone(), c.value.clone()))
            .collect()
    }

    #[test]
    fn parses_env_files() {
        let loaded = load(
            "# comment\nexport A_KEY=\"quoted value\"\nB_TOKEN='single q'\nC=plain-value # note\nDEBUG=true\nEMPTY=\n",
            "env",
        )
        .unwrap();
        assert_eq!(
            names_values(&loaded),
            [
                ("A_KEY".into(), "quoted value".into()),
                ("B_TOKEN".into(), "single q".into()),
                ("C".into(), "plain-value".into())
            ]
        );
        assert_eq!(loaded.skipped_benign, ["DEBUG"]);
        let err = load("JUST_A_NAME\n", "env").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn reads_json_credentials_and_env_blocks() {
        let loaded = load(
            r#"{"model": "claude-x", "apiKey": "abc-def-ghi-jkl",
                "env": {"ANTHROPIC_API_KEY": "secret-number-one", "FLAG": "1"},
                "providers": [{"name": "p", "auth": {"token": "nested-token-value"}}],
                "note": "ghp_0123456789abcdefghijklmnopqrstuvwxyz"}"#,
            "json",
        )
        .unwrap();
        let got = names_values(&loaded);
        assert!(got.contains(&("apiKey".into(), "abc-def-ghi-jkl".into())));
        assert!(got.contains(&("ANTHROPIC_API_KEY".into(), "secret-number-one".into())));
        assert!(got.contains(&("auth".into(), "nested-token-value".into())));
        assert!(got.contains(&(
            "note".into(),
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz".into()
        )));
        assert!(
            !got.iter().any(|(_, v)| v == "claude-x"),
            "model names are not secrets"
        );
        assert_eq!(loaded.skipped_benign, ["FLAG"]);
        assert!(load("{not json", "json").is_err());
    }

    #[test]
    fn an_endless_or_huge_secrets_file_is_refused_at_the_cap() {
        let err = load_file(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "--secrets-from /dev/zero: cannot read it: larger than the 4 MiB limit"
            ),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-text.env");
        std::fs::write(&path, b"A=\xff\xfe\n").unwrap();
        assert!(
            load_file(&path)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }
}
