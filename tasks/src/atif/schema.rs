//! Field tables of the ATIF objects: which keys exist, since which version, and which are
//! required (docs/harbor-format.md §7.2). Keys not listed are unknown and rejected (`extra="forbid"`).

use super::Version;

/// One key of an ATIF object.
pub(crate) struct Field {
    /// The key.
    pub name: &'static str,
    /// The first schema version that has it.
    pub since: Version,
    /// Whether it must be present (it may still be checked for type when optional).
    pub required: bool,
}

const fn req(name: &'static str) -> Field {
    Field {
        name,
        since: Version::V1_0,
        required: true,
    }
}

const fn opt(name: &'static str) -> Field {
    Field {
        name,
        since: Version::V1_0,
        required: false,
    }
}

const fn since(name: &'static str, since: Version) -> Field {
    Field {
        name,
        since,
        required: false,
    }
}

/// Root `Trajectory`. `session_id` is required up to v1.6; the walker checks that separately.
pub(crate) const TRAJECTORY: &[Field] = &[
    req("schema_version"),
    opt("session_id"),
    since("trajectory_id", Version::V1_7),
    req("agent"),
    req("steps"),
    opt("notes"),
    opt("final_metrics"),
    opt("continued_trajectory_ref"),
    since("extra", Version::V1_1),
    since("subagent_trajectories", Version::V1_7),
];

/// `Agent`.
pub(crate) const AGENT: &[Field] = &[
    req("name"),
    req("version"),
    opt("model_name"),
    since("tool_definitions", Version::V1_5),
    opt("extra"),
];

/// `Step`.
pub(crate) const STEP: &[Field] = &[
    req("step_id"),
    opt("timestamp"),
    req("source"),
    opt("model_name"),
    opt("reasoning_effort"),
    req("message"),
    opt("reasoning_content"),
    opt("tool_calls"),
    opt("observation"),
    opt("metrics"),
    since("is_copied_context", Version::V1_5),
    since("llm_call_count", Version::V1_7),
    opt("extra"),
];

/// Step fields that only agent steps may set.
pub(crate) const AGENT_ONLY: &[&str] = &[
    "model_name",
    "reasoning_effort",
    "reasoning_content",
    "tool_calls",
    "metrics",
];

/// `ToolCall`.
pub(crate) const TOOL_CALL: &[Field] = &[
    req("tool_call_id"),
    req("function_name"),
    req("arguments"),
    since("extra", Version::V1_7),
];

/// `Observation`.
pub(crate) const OBSERVATION: &[Field] = &[req("results")];

/// `ObservationResult`.
pub(crate) const OBSERVATION_RESULT: &[Field] = &[
    opt("source_call_id"),
    opt("content"),
    opt("subagent_trajectory_ref"),
    since("extra", Version::V1_7),
];

/// `SubagentTrajectoryRef`.
pub(crate) const SUBAGENT_REF: &[Field] = &[
    opt("trajectory_id"),
    opt("session_id"),
    opt("trajectory_path"),
    opt("extra"),
];

/// Per-step `Metrics`.
pub(crate) const METRICS: &[Field] = &[
    opt("prompt_tokens"),
    opt("completion_tokens"),
    opt("cached_tokens"),
    opt("cost_usd"),
    since("prompt_token_ids", Version::V1_4),
    since("completion_token_ids", Version::V1_3),
    opt("logprobs"),
    opt("extra"),
];

/// `FinalMetrics`.
pub(crate) const FINAL_METRICS: &[Field] = &[
    opt("total_prompt_tokens"),
    opt("total_completion_tokens"),
    opt("total_cached_tokens"),
    opt("total_cost_usd"),
    opt("total_steps"),
    opt("extra"),
];

/// `ContentPart` (v1.6).
pub(crate) const CONTENT_PART: &[Field] = &[req("type"), opt("text"), opt("source")];

/// An image part's `source`.
pub(crate) const IMAGE_SOURCE: &[Field] = &[req("media_type"), req("path")];

/// Media types an image part may have.
pub(crate) const IMAGE_MEDIA_TYPES: &[&str] =
    &["image/jpeg", "image/png", "image/gif", "image/webp"];
