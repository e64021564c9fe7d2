//! `metadata_formatted_correctly`: Harbor's `metadata.yaml` schema (reference §6.1):
//! `agent_url`, `agent_display_name`, `agent_org_display_name`, and `models` with at least one
//! entry of `model_name`, `model_provider`, `model_display_name`, `model_org_display_name`.

use std::path::Path;

use serde_json::Value;

use super::report::Violation;
use super::{Rule, SubmissionError, yaml};

const TOP: [&str; 3] = ["agent_url", "agent_display_name", "agent_org_display_name"];
const MODEL: [&str; 4] = [
    "model_name",
    "model_provider",
    "model_display_name",
    "model_org_display_name",
];

/// Largest `metadata.yaml` read: a few hundred bytes in practice.
const MAX_METADATA_BYTES: u64 = 1 << 20;

/// Reads `path` and returns the violations of the metadata rule; an unreadable file (or one
/// larger than 1 MiB) is an error.
pub fn check(path: &Path) -> Result<Vec<Violation>, SubmissionError> {
    let bytes = tasks::bounded::read_capped(path, MAX_METADATA_BYTES, "metadata.yaml")
        .map_err(|e| SubmissionError::io(path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        SubmissionError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        )
    })?;
    let file = path.display().to_string();
    let value = match yaml::parse(&text) {
        Ok(v) => v,
        Err(e) => {
            return Ok(vec![Violation {
                rule: Rule::MetadataFormattedCorrectly,
                file: Some(file),
                line: Some(e.line),
                message: format!("cannot read the YAML: {}", e.problem),
            }]);
        }
    };
    Ok(check_value(&value, &file))
}

fn non_empty(value: Option<&Value>) -> bool {
    value
        .and_then(Value::as_str)
        .is_some_and(|s| !s.trim().is_empty())
}

/// The violations of a parsed metadata document shown as `file`.
pub fn check_value(value: &Value, file: &str) -> Vec<Violation> {
    let v = |message: String| {
        Violation::new(
            Rule::MetadataFormattedCorrectly,
            Some(file.to_owned()),
            message,
        )
    };
    let mut violations = Vec::new();
    if !value.is_object() {
        return vec![v("must be a mapping with agent_url, agent_display_name, agent_org_display_name and models".into())];
    }
    for key in TOP {
        if !non_empty(value.get(key)) {
            violations.push(v(format!("`{key}` is missing or empty")));
        }
    }
    match value.get("models").and_then(Value::as_array) {
        Some(models) if !models.is_empty() => {
            for (i, model) in models.iter().enumerate() {
                for key in MODEL {
                    if !non_empty(model.get(key)) {
                        violations.push(v(format!("`models[{i}].{key}` is missing or empty")));
                    }
                }
            }
        }
        _ => violations.push(v(format!(
            "`models` must list at least one model with {}",
            MODEL.join(", ")
        ))),
    }
    violations
}
