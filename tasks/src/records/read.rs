//! The one tolerant reader of job and trial records, runner's and every Harbor version's
//! (0.13 to 0.26): a capped JSON read, and the fallbacks every reader of a foreign job dir
//! needs (where the task's name is, what counts as a reward, how a model is named). The viewer,
//! `validate-submission`, resume, merge and the end-of-job lines all read through here, so a
//! fallback is defined once.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::str_at;
use crate::bounded::{MAX_RECORD_BYTES, read_capped};

/// Why a record could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Reading failed, or the file is larger than its cap (`io::ErrorKind::FileTooLarge`, with
    /// a message naming the cap).
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The record.
        path: PathBuf,
        /// The OS's error, or the cap's.
        source: io::Error,
    },
    /// The bytes are not JSON, or not the shape asked for.
    #[error("{}: {problem}", path.display())]
    Malformed {
        /// The record.
        path: PathBuf,
        /// What the parser said.
        problem: String,
    },
}

impl RecordError {
    /// The record the error is about.
    pub fn path(&self) -> &Path {
        match self {
            RecordError::Unreadable { path, .. } | RecordError::Malformed { path, .. } => path,
        }
    }

    /// Whether the record was refused for its size rather than its content.
    pub fn is_too_large(&self) -> bool {
        matches!(self, RecordError::Unreadable { source, .. } if source.kind() == io::ErrorKind::FileTooLarge)
    }
}

/// Reads `path` whole, at most `cap` bytes (`what` names the file in the cap's message);
/// `Ok(None)` when there is no such file.
fn read_bytes(path: &Path, cap: u64, what: &str) -> Result<Option<Vec<u8>>, RecordError> {
    match read_capped(path, cap, what) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RecordError::Unreadable {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Reads `path` as JSON, at most `cap` bytes (`what` names the file in the cap's message, e.g.
/// "trajectory"); `Ok(None)` when there is no such file.
pub fn read_json_capped(path: &Path, cap: u64, what: &str) -> Result<Option<Value>, RecordError> {
    let Some(bytes) = read_bytes(path, cap, what)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| RecordError::Malformed {
            path: path.to_owned(),
            problem: format!("not valid JSON: {e}"),
        })
}

/// What names a record in the cap's message.
const RECORD: &str = "job or trial record";

/// Reads the JSON record at `path` (config.json, result.json, lock.json: at most
/// [`MAX_RECORD_BYTES`]); `Ok(None)` when there is no such file.
pub fn read_json(path: &Path) -> Result<Option<Value>, RecordError> {
    read_json_capped(path, MAX_RECORD_BYTES, RECORD)
}

/// Reads the record at `path` as runner's typed record `T` (a [`super::TrialResult`], a
/// [`super::JobConfig`], …), straight from its bytes (resume reads every trial's this way);
/// `Ok(None)` when there is no such file.
pub fn read_typed<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, RecordError> {
    let Some(bytes) = read_bytes(path, MAX_RECORD_BYTES, RECORD)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| RecordError::Malformed {
            path: path.to_owned(),
            problem: format!("does not read as a runner record: {e}"),
        })
}

/// The trial's config: its own config.json, else the copy Harbor embeds in result.json.
pub fn trial_config<'v>(config: Option<&'v Value>, result: Option<&'v Value>) -> Option<&'v Value> {
    config.or_else(|| result.and_then(|r| r.get("config")))
}

/// The trial's task name: result.json's `task_name`, else the config's `task.name`, else the
/// last part of the config's `task.path` (Harbor 0.13 records only the path).
pub fn task_name<'v>(
    result: Option<&'v Value>,
    trial_config: Option<&'v Value>,
) -> Option<&'v str> {
    result
        .and_then(|r| str_at(r, "/task_name"))
        .or_else(|| trial_config.and_then(|c| str_at(c, "/task/name")))
        .or_else(|| {
            trial_config
                .and_then(|c| str_at(c, "/task/path"))
                .and_then(|p| p.trim_end_matches('/').rsplit('/').next())
                .filter(|name| !name.is_empty())
        })
}

/// A reward as a number: numbers as written, booleans as 1 and 0 (Harbor's reward files
/// allow both); anything else is no reward.
pub fn reward_number(value: &Value) -> Option<f64> {
    value
        .as_f64()
        .or_else(|| value.as_bool().map(|b| f64::from(u8::from(b))))
}

/// `verifier_result.rewards` of a trial's or a step's record, when it is an object.
pub fn rewards_object(record: &Value) -> Option<&serde_json::Map<String, Value>> {
    record.pointer("/verifier_result/rewards")?.as_object()
}

/// The main reward of a record (see [`crate::metrics::main_reward`]), as a number.
pub fn main_reward(record: &Value) -> Option<f64> {
    let rewards = rewards_object(record)?;
    reward_number(crate::metrics::main_reward(
        rewards.iter().map(|(name, v)| (name.as_str(), v)),
    )?)
}

/// The model an `agent_info` names: `provider/name`, or the bare name when the provider is
/// missing, empty or `unknown` (as Harbor writes for a model it cannot place).
pub fn model_of(agent_info: &Value) -> Option<String> {
    let model_info = agent_info.get("model_info").filter(|m| !m.is_null())?;
    let name = str_at(model_info, "/name")?;
    Some(match str_at(model_info, "/provider") {
        Some(provider) if provider != "unknown" => format!("{provider}/{name}"),
        _ => name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_task_name_falls_back_from_the_result_to_the_configs_name_and_path() {
        let config = json!({"task": {"name": "", "path": "datasets/tb/hello-world/"}});
        assert_eq!(task_name(None, Some(&config)), Some("hello-world"));
        let named = json!({"task": {"name": "org/hello", "path": "x/y"}});
        assert_eq!(task_name(None, Some(&named)), Some("org/hello"));
        let result = json!({"task_name": "from-result", "config": named});
        let embedded = trial_config(None, Some(&result));
        assert_eq!(task_name(Some(&result), embedded), Some("from-result"));
        assert_eq!(
            task_name(None, embedded),
            Some("org/hello"),
            "Harbor's embedded config"
        );
        assert_eq!(task_name(None, Some(&json!({"task": {"path": "/"}}))), None);
    }

    #[test]
    fn rewards_are_numbers_or_booleans_and_the_main_one_is_chosen_once() {
        assert_eq!(reward_number(&json!(true)), Some(1.0));
        assert_eq!(reward_number(&json!(false)), Some(0.0));
        assert_eq!(reward_number(&json!(0.25)), Some(0.25));
        assert_eq!(reward_number(&json!("1")), None);
        let result = json!({"verifier_result": {"rewards": {"reward": true, "style": 0.5}}});
        assert_eq!(main_reward(&result), Some(1.0));
        assert_eq!(main_reward(&json!({"verifier_result": null})), None);
    }

    #[test]
    fn a_model_is_provider_slash_name_unless_the_provider_is_unknown() {
        let info = |provider: Value| json!({"model_info": {"name": "m", "provider": provider}});
        assert_eq!(
            model_of(&info(json!("openai"))).as_deref(),
            Some("openai/m")
        );
        assert_eq!(model_of(&info(json!("unknown"))).as_deref(), Some("m"));
        assert_eq!(model_of(&info(json!(""))).as_deref(), Some("m"));
        assert_eq!(model_of(&info(Value::Null)).as_deref(), Some("m"));
        assert_eq!(model_of(&json!({"model_info": null})), None);
    }

    #[test]
    fn a_record_is_absent_too_large_malformed_or_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        assert!(read_json(&path).unwrap().is_none());
        std::fs::write(&path, "{\"a\": 1}").unwrap();
        assert_eq!(read_json(&path).unwrap(), Some(json!({"a": 1})));
        std::fs::write(&path, "{").unwrap();
        let err = read_json(&path).unwrap_err();
        assert!(!err.is_too_large() && err.to_string().contains("not valid JSON"));
        std::fs::write(&path, "[1, 2]").unwrap();
        let err = read_typed::<super::super::JobConfig>(&path).unwrap_err();
        assert!(err.to_string().contains("does not read as a runner record"));
        std::fs::write(&path, "{\"a\": 12345}").unwrap();
        let err = read_json_capped(&path, 4, "record").unwrap_err();
        assert!(err.is_too_large(), "{err}");
        assert_eq!(err.path(), path);
    }
}
