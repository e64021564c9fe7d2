//! The fields Harbor 0.26 added to its job and trial configs, written with 0.26's defaults so
//! 0.26's tools find every field they define (runner implements none of them beyond their
//! defaults but `override_error_policy`; `runner run -c` refuses another non-default value by
//! name). Each group is flattened into
//! its record, after the fields Harbor 0.13 already had.

use serde::{Deserialize, Serialize};

use crate::error_policy::ErrorPolicyOverrides;

/// A record's `schema_version`: 1, the only version Harbor 0.26 writes (older records, which
/// omit it, read as 1 too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SchemaVersion(pub u32);

impl Default for SchemaVersion {
    fn default() -> Self {
        SchemaVersion(1)
    }
}

/// Harbor 0.26's additions to `AgentConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AgentConfig026 {
    /// The model API's base URL.
    pub base_url: Option<String>,
    /// A concurrency group shared with other agents.
    pub concurrency_group: Option<String>,
    /// A trajectory to load.
    pub load_trajectory: Option<serde_json::Value>,
    /// The model API's wire format.
    pub model_api_format: Option<String>,
    /// The env name of the model API key.
    pub model_api_key_name: Option<String>,
    /// Per-agent concurrency.
    pub n_concurrent: Option<u32>,
    /// Resume from a trajectory.
    pub resume_trajectory: bool,
    /// Pass the model name through unparsed.
    pub skip_model_parsing: bool,
}

/// The [`AgentConfig026`] keys: a trial's identity leaves them out, so adding them changed no
/// trial's name (runner only ever records their defaults).
pub const AGENT_026_KEYS: [&str; 8] = [
    "base_url",
    "concurrency_group",
    "load_trajectory",
    "model_api_format",
    "model_api_key_name",
    "n_concurrent",
    "resume_trajectory",
    "skip_model_parsing",
];

/// Harbor 0.26's addition to `EnvironmentConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct EnvironmentConfig026 {
    /// Stream the environment's output.
    pub stream: bool,
}

/// The [`EnvironmentConfig026`] keys, left out of a trial's identity as [`AGENT_026_KEYS`].
pub const ENVIRONMENT_026_KEYS: [&str; 1] = ["stream"];

/// Harbor 0.26's additions to `TrialConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TrialConfig026 {
    /// The document version.
    pub schema_version: SchemaVersion,
    /// Extra instruction texts.
    pub extra_instructions: Vec<serde_json::Value>,
    /// Install the agent and stop.
    pub install_only: bool,
    /// Error-policy overrides by exception type (the job's, copied into each trial).
    pub override_error_policy: ErrorPolicyOverrides,
    /// The trial this one re-runs.
    pub source_trial: Option<serde_json::Value>,
    /// The user agent for model calls.
    pub user_agent: Option<String>,
}

/// Harbor 0.26's additions to `JobConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct JobConfig026 {
    /// The document version.
    pub schema_version: SchemaVersion,
    /// Extra instruction texts.
    pub extra_instructions: Vec<serde_json::Value>,
    /// Install the agents and stop.
    pub install_only: bool,
    /// Error-policy overrides by exception type (see [`crate::error_policy`]).
    pub override_error_policy: ErrorPolicyOverrides,
    /// Skip checking model credentials before the job.
    pub skip_credential_checks: bool,
    /// Jobs this one re-runs trials of.
    pub source_jobs: Vec<serde_json::Value>,
    /// The user agent for model calls.
    pub user_agent: Option<String>,
}
