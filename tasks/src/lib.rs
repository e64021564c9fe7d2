//! Harbor task, dataset, record and trajectory formats, and the sandbox trait agents and
//! verifiers drive. Everything here is plain data and pure functions: no Docker, no network.

pub mod atif;
pub mod atomic;
pub mod config;
pub mod dataset;
pub mod digest;
pub mod error;
pub mod exception;
pub mod identity;
pub mod metrics;
pub mod multipliers;
pub mod records;
pub mod sandbox;
pub mod task;
pub mod template;

pub use config::{NetworkMode, TaskConfig};
pub use dataset::Dataset;
pub use error::TaskError;
pub use exception::ExceptionType;
pub use identity::TaskId;
pub use multipliers::{Multipliers, TimedPhase};
pub use sandbox::{ExecOutput, ExecRequest, Sandbox, SandboxError, shell_quote};
pub use task::Task;

/// This runner's version, recorded in lock files and provenance.
pub const RUNNER_VERSION: &str = env!("CARGO_PKG_VERSION");
