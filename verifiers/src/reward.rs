//! Reward files: `reward.json` (a flat name→number map) is read before `reward.txt` (one number).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::VerifierErrorKind;
use crate::host_read::{ReadFailure, read_regular_file};

/// The JSON reward file's name inside the verifier directory.
pub const REWARD_JSON: &str = "reward.json";
/// The text reward file's name inside the verifier directory.
pub const REWARD_TXT: &str = "reward.txt";
/// Reward files above this size are refused unread.
pub const REWARD_FILE_LIMIT: u64 = 64 * 1024;

/// Rewards by name.
pub type Rewards = BTreeMap<String, f64>;

/// Reads the rewards from a downloaded verifier directory: `reward.json` first, then `reward.txt`.
pub fn read_rewards(verifier_dir: &Path) -> Result<Rewards, VerifierErrorKind> {
    for (name, parse) in [
        (REWARD_JSON, parse_reward_json as fn(&str) -> _),
        (REWARD_TXT, parse_reward_txt),
    ] {
        let path = verifier_dir.join(name);
        let bytes = match read_regular_file(&path, REWARD_FILE_LIMIT) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => continue,
            Err(ReadFailure::Refused(refusal)) => {
                return Err(VerifierErrorKind::RewardFileUnsafe { path, refusal });
            }
            Err(ReadFailure::Io(e)) => {
                return Err(VerifierErrorKind::OutputParse {
                    path,
                    message: format!("reading it failed: {e}"),
                });
            }
        };
        if bytes.is_empty() {
            return Err(VerifierErrorKind::RewardFileEmpty { path });
        }
        let text = String::from_utf8(bytes).map_err(|_| VerifierErrorKind::OutputParse {
            path: path.clone(),
            message: "it is not UTF-8 text".into(),
        })?;
        return parse(&text).map_err(|e| VerifierErrorKind::OutputParse {
            path,
            message: e.to_string(),
        });
    }
    Err(VerifierErrorKind::RewardFileNotFound {
        dir: verifier_dir.to_path_buf(),
    })
}

/// Why a reward file's text is not rewards; the message follows `could not be parsed: `.
#[derive(Debug, thiserror::Error)]
pub enum RewardParseError {
    /// `reward.txt` holds only whitespace.
    #[error("it holds only whitespace; write a number such as 1 or 0.5")]
    Blank,
    /// `reward.txt` is not a number (the start of the text is quoted).
    #[error("{0} is not a number")]
    NotANumber(String),
    /// A reward is NaN or infinite, which poisons means and cannot be written back as JSON.
    #[error("reward {key:?} is {value}, not a finite number")]
    NotFinite {
        /// The reward's name.
        key: String,
        /// The value.
        value: f64,
    },
    /// `reward.json` is not JSON.
    #[error("it is not valid JSON ({0}); write a flat object such as {{\"reward\": 1.0}}")]
    Json(#[source] serde_json::Error),
    /// `reward.json` is JSON but not an object.
    #[error("it must be a JSON object of name -> number, found {0}")]
    NotAnObject(&'static str),
    /// `reward.json` is an empty object.
    #[error("it is an empty object; write at least one reward such as {{\"reward\": 1.0}}")]
    EmptyObject,
    /// A value of `reward.json` is not a number (booleans and strings included).
    #[error("key {key:?} must be a number, found {kind}")]
    NotANumberValue {
        /// The reward's name.
        key: String,
        /// What the value is (`a boolean`, `a string`, ...).
        kind: &'static str,
    },
}

/// Parses `reward.txt`: one finite number, surrounding whitespace allowed; the key is `reward`.
pub fn parse_reward_txt(text: &str) -> Result<Rewards, RewardParseError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(RewardParseError::Blank);
    }
    let value: f64 = trimmed
        .parse()
        .map_err(|_| RewardParseError::NotANumber(preview(trimmed)))?;
    let value = finite("reward", value)?;
    Ok(BTreeMap::from([("reward".to_owned(), value)]))
}

/// Parses `reward.json`: a non-empty flat JSON object whose values are all finite numbers.
pub fn parse_reward_json(text: &str) -> Result<Rewards, RewardParseError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(RewardParseError::Json)?;
    let serde_json::Value::Object(map) = value else {
        return Err(RewardParseError::NotAnObject(json_kind(&value)));
    };
    if map.is_empty() {
        return Err(RewardParseError::EmptyObject);
    }
    map.into_iter()
        .map(|(key, value)| match value.as_f64() {
            // Booleans and strings are refused: Harbor's schema wants numbers, and "1" is ambiguous.
            Some(number) if value.is_number() => Ok((key.clone(), finite(&key, number)?)),
            _ => Err(RewardParseError::NotANumberValue {
                key,
                kind: json_kind(&value),
            }),
        })
        .collect()
}

// NaN and infinities poison means and cannot be written back as JSON, so they are parse errors.
fn finite(key: &str, value: f64) -> Result<f64, RewardParseError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(RewardParseError::NotFinite {
            key: key.to_owned(),
            value,
        })
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn preview(text: &str) -> String {
    let short: String = text.chars().take(40).collect();
    if short.len() < text.len() {
        format!("{short:?}...")
    } else {
        format!("{short:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(key: &str, value: f64) -> Rewards {
        BTreeMap::from([(key.to_owned(), value)])
    }

    #[test]
    fn txt_accepts_numbers_with_surrounding_whitespace() {
        assert_eq!(parse_reward_txt("1").unwrap(), one("reward", 1.0));
        assert_eq!(parse_reward_txt("1\n").unwrap(), one("reward", 1.0));
        assert_eq!(
            parse_reward_txt("  0.25 \r\n").unwrap(),
            one("reward", 0.25)
        );
        assert_eq!(parse_reward_txt("-1e-1").unwrap(), one("reward", -0.1));
        assert_eq!(parse_reward_txt("0").unwrap(), one("reward", 0.0));
    }

    /// Asserts that `parse` refuses every input with a message holding the expected text.
    fn assert_refuses(
        parse: fn(&str) -> Result<Rewards, RewardParseError>,
        cases: &[(&str, &str)],
    ) {
        for (input, expected) in cases {
            let err = parse(input).expect_err(input).to_string();
            assert!(err.contains(expected), "{input:?}: {err}");
        }
    }

    #[test]
    fn txt_refuses_garbage_whitespace_and_non_finite() {
        assert_refuses(
            parse_reward_txt,
            &[
                ("passed", "not a number"),
                ("1 2", "not a number"),
                (" \n\t", "whitespace"),
                ("NaN", "not a finite number"),
                ("inf", "not a finite number"),
                ("-infinity", "not a finite number"),
            ],
        );
    }

    #[test]
    fn json_accepts_a_flat_map_of_numbers() {
        let rewards =
            parse_reward_json(r#"{"reward": 1, "correctness": 0.5, "style": -2e0}"#).unwrap();
        assert_eq!(
            rewards,
            BTreeMap::from([
                ("reward".into(), 1.0),
                ("correctness".into(), 0.5),
                ("style".into(), -2.0)
            ])
        );
        assert_eq!(
            parse_reward_json("\n {\"reward\": 0.0} \n").unwrap(),
            one("reward", 0.0)
        );
    }

    #[test]
    fn json_refuses_nested_and_non_numeric_values() {
        assert_refuses(
            parse_reward_json,
            &[
                (
                    r#"{"reward": {"a": 1}}"#,
                    "\"reward\" must be a number, found an object",
                ),
                (r#"{"reward": [1]}"#, "an array"),
                (r#"{"reward": "1"}"#, "a string"),
                (r#"{"reward": true}"#, "a boolean"),
                (r#"{"reward": null}"#, "null"),
            ],
        );
    }

    #[test]
    fn json_refuses_non_objects_empty_objects_and_nan() {
        assert_refuses(
            parse_reward_json,
            &[
                ("1.0", "found a number"),
                ("[1.0]", "found an array"),
                ("{}", "empty object"),
                // Python's json accepts NaN; serde_json (rightly) does not, and neither do we.
                (r#"{"reward": NaN}"#, "not valid JSON"),
                ("{\"reward\": 1", "not valid JSON"),
                ("   ", "not valid JSON"),
            ],
        );
    }

    #[test]
    fn json_is_read_before_txt() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(REWARD_TXT), "0\n").unwrap();
        std::fs::write(
            dir.path().join(REWARD_JSON),
            r#"{"reward": 1.0, "extra": 2}"#,
        )
        .unwrap();
        assert_eq!(
            read_rewards(dir.path()).unwrap(),
            BTreeMap::from([("reward".into(), 1.0), ("extra".into(), 2.0)])
        );
    }

    #[test]
    fn txt_is_used_when_json_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(REWARD_TXT), " 0.5\n").unwrap();
        assert_eq!(read_rewards(dir.path()).unwrap(), one("reward", 0.5));
    }

    /// Asserts that reading the rewards in `dir` fails as `exception_type`, with a message
    /// holding `text`.
    fn assert_read_fails(dir: &Path, exception_type: &str, text: &str) {
        let err = read_rewards(dir).unwrap_err();
        assert_eq!(err.exception_type(), exception_type);
        assert!(err.to_string().contains(text), "{err}");
    }

    #[test]
    fn missing_empty_and_unparsable_files_have_harbor_names() {
        let dir = tempfile::tempdir().unwrap();
        assert_read_fails(dir.path(), "RewardFileNotFoundError", "reward.txt");

        std::fs::write(dir.path().join(REWARD_TXT), "").unwrap();
        let path = dir.path().join(REWARD_TXT).display().to_string();
        assert_read_fails(dir.path(), "RewardFileEmptyError", &path);

        std::fs::write(dir.path().join(REWARD_TXT), "yes\n").unwrap();
        assert_read_fails(
            dir.path(),
            "VerifierOutputParseError",
            "\"yes\" is not a number",
        );

        std::fs::write(dir.path().join(REWARD_TXT), [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_rewards(dir.path()).unwrap_err().exception_type(),
            "VerifierOutputParseError"
        );
    }

    #[test]
    fn unsafe_json_is_refused_even_when_txt_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(REWARD_TXT), "1").unwrap();
        std::os::unix::fs::symlink(dir.path().join(REWARD_TXT), dir.path().join(REWARD_JSON))
            .unwrap();
        assert_read_fails(dir.path(), "RewardFileUnsafeError", "symbolic link");
    }

    #[test]
    fn oversized_reward_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut big = b"1".to_vec();
        big.extend(std::iter::repeat_n(b' ', REWARD_FILE_LIMIT as usize));
        std::fs::write(dir.path().join(REWARD_TXT), big).unwrap();
        assert_read_fails(dir.path(), "RewardFileUnsafeError", "65537 bytes");
    }

    #[test]
    fn fifo_reward_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REWARD_TXT);
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        assert_read_fails(dir.path(), "RewardFileUnsafeError", "fifo");
    }
}
