//! Harbor task, dataset, record and trajectory formats, and the sandbox trait agents and
//! verifiers drive. Everything here is plain data and pure functions: no Docker, no network.

pub mod atif;
pub mod atomic;
pub mod bounded;
pub mod checksum;
pub mod collect;
pub mod config;
mod config_check;
pub mod confined;
pub mod dataset;
pub mod digest;
pub mod error;
pub mod error_policy;
pub mod exception;
pub mod file_filter;
pub mod file_hashes;
#[cfg(test)]
mod harbor_cases;
pub mod identity;
pub mod isolation;
pub mod layout;
pub mod limits;
pub mod lint;
pub mod mcp_headers;
pub mod metrics;
pub mod multipliers;
pub mod nesting;
pub mod outcome;
pub mod records;
pub mod sandbox;
pub mod steps;
pub mod steps_rewards;
pub mod steps_trajectory;
pub mod task;
pub mod template;
#[cfg(test)]
mod test_files;
pub mod unsupported;
pub mod walk;

pub use config::{NetworkMode, TaskConfig};
pub use dataset::Dataset;
pub use error::TaskError;
pub use exception::{Blame, ExceptionFamily, ExceptionType, UnknownExceptionName};
pub use identity::TaskId;
pub use multipliers::{Multipliers, TimedPhase};
pub use outcome::TrialOutcome;
pub use sandbox::{ExecOutput, ExecRequest, Sandbox, SandboxError, shell_quote};
pub use task::Task;
pub use unsupported::UnsupportedFeature;

/// This runner's version, recorded in lock files and provenance.
pub const RUNNER_VERSION: &str = env!("CARGO_PKG_VERSION");
