//! ATIF, the Agent Trajectory Interchange Format (docs/harbor-format.md §7): serde types for writing
//! trajectories and a validator for schema versions ATIF-v1.0 … ATIF-v1.7.
//!
//! The validator is a pure function over a JSON value that returns every error with its JSON
//! path (`$.steps[2].tool_calls[0].arguments`), the way Harbor's `trajectory_validator` collects
//! all errors instead of stopping at the first.

mod model_usage;
mod schema;
mod timestamp;
mod types;
mod version;
mod walk;

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

pub use model_usage::model_usage;
pub use types::{
    Agent, Content, ContentPart, FinalMetrics, ImageSource, Metrics, Observation,
    ObservationResult, Step, StepSource, ToolCall, Trajectory,
};
pub use version::Version;

/// One validation error: where in the document, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtifError {
    /// JSON path from the root `$`, e.g. `$.steps[2].tool_calls[0].arguments`.
    pub path: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl std::fmt::Display for AtifError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Validates a trajectory document; empty when valid. Image paths are not checked (no file).
pub fn validate_value(value: &Value) -> Vec<AtifError> {
    let mut walker = walk::Walker::new(None);
    walker.trajectory("$", value);
    walker.errors
}

/// Validates a trajectory document read from a file in `dir`: also checks that local image
/// paths exist relative to `dir`.
pub fn validate_value_in_dir(value: &Value, dir: &Path) -> Vec<AtifError> {
    let mut walker = walk::Walker::new(Some(dir));
    walker.trajectory("$", value);
    walker.errors
}

/// Reads and validates a trajectory file. Invalid JSON is a validation error at `$`; only an
/// unreadable file is an `Err`, including one larger than
/// [`MAX_TRAJECTORY_BYTES`](crate::bounded::MAX_TRAJECTORY_BYTES) (kind `FileTooLarge`), which
/// is never read past the cap.
pub fn validate_file(path: &Path) -> Result<Vec<AtifError>, std::io::Error> {
    let bytes =
        crate::bounded::read_capped(path, crate::bounded::MAX_TRAJECTORY_BYTES, "trajectory")?;
    Ok(validate_bytes(
        &bytes,
        path.parent().unwrap_or(Path::new(".")),
    ))
}

/// Validates the bytes of a trajectory file that lives in `dir`.
pub fn validate_bytes(bytes: &[u8], dir: &Path) -> Vec<AtifError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => validate_value_in_dir(&value, dir),
        Err(e) => vec![AtifError {
            path: "$".to_owned(),
            message: format!("not valid JSON: {e}"),
        }],
    }
}

#[cfg(test)]
mod tests;
