//! Job and trial records in Harbor's shapes and field names (docs/harbor-format.md §2).
//!
//! Writers use these types; readers of foreign job dirs (validation) read JSON values instead,
//! so older Harbor shapes are accepted too.

mod containment;
mod job_config;
mod job_result;
mod lock;
mod trial_config;
mod trial_result;

pub use containment::{
    LeftoverProcess, StorageEnforcement, TrialLimits, TruncatedOutput, VerifierIsolation,
};
pub use job_config::{DatasetRef, JobConfig, RetryConfig};
pub use job_result::{Coverage, EvalStats, JobLlmUsage, JobResult, JobStats};
pub use lock::{JobLock, LockImage, LockImageOrigin, LockTask, LockTrial, RunnerInfo};
pub use trial_config::{
    AgentConfig, EnvironmentConfig, TaskRef, TrialConfig, TrialIdentity, VerifierConfig,
};
pub use trial_result::{
    AgentContext, AgentInfo, ExceptionInfo, ModelInfo, NamedCheck, PauseRecord, PhaseTiming,
    TrialResult, VerifierResult,
};
