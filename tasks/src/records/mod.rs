//! Job and trial records in Harbor's shapes and field names (docs/harbor-format.md §2).
//!
//! Writers use these types; readers of foreign job dirs read JSON values through [`read`]
//! instead, so older Harbor shapes are accepted too.

mod containment;
mod harbor_026;
mod job_config;
mod job_result;
mod llm_usage;
mod lock;
pub mod read;
pub mod record_manifest;
pub mod record_signature;
mod totals;
pub mod trajectory_binding;
mod trial_config;
mod trial_result;

pub use containment::{
    DEFAULT_DOWNLOAD_CAP_ENTRIES, LeftoverProcess, StorageEnforcement, TrialLimits,
    TruncatedOutput, VerifierIsolation,
};
pub use harbor_026::{
    AGENT_026_KEYS, AgentConfig026, ENVIRONMENT_026_KEYS, EnvironmentConfig026, JobConfig026,
    SchemaVersion, TrialConfig026,
};
pub use job_config::{DatasetRef, JobConfig, RetryConfig};
pub use job_result::{
    Coverage, EstimateInterval, EvalIntervals, EvalStats, JobLlmUsage, JobResult, JobStats,
};
pub use llm_usage::TrialLlmUsage;
pub use lock::{
    HarborLock, JOB_LOCK_SCHEMA, JobLock, LockImage, LockImageOrigin, LockTask, LockTrial,
    LockVerifier, RunnerInfo, TaskOrigin, TrialLock026, harbor_lock_json,
};
pub use record_manifest::{RECORD_MANIFEST, RecordManifest};
pub use record_signature::RECORD_SIGNATURE;
pub use totals::{Rewards, SharedNames, TotalsException, TrialTotals, TrialUsage, eval_key};
pub use trial_config::{
    AgentConfig, EnvironmentConfig, TaskRef, TrialConfig, TrialIdentity, VerifierConfig,
};
pub use trial_result::{
    AgentContext, AgentInfo, ExceptionInfo, ModelInfo, ModelUsage, NamedCheck, NetworkAttempts,
    PauseRecord, PhaseTiming, StepResult, TrialResult, VerifierResult,
};

/// The non-empty string at `pointer` in a record read as JSON: how readers of foreign job dirs
/// (any Harbor version, other tools) look a field up, an empty string counting as absent.
pub fn str_at<'v>(value: &'v serde_json::Value, pointer: &str) -> Option<&'v str> {
    value
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
}
