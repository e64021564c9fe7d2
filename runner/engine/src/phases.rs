//! The trial's phases as `runner serve` drives them: an episode is a session of one task's
//! container as a trial's is, so it starts, readies and verifies that container through the
//! same functions the trial's sequence (`trial/mod.rs`) calls, never through copies of their
//! order. Everything here is used by the trial too; what only serving needs stays in serve.

pub use crate::trial::environment::{AgentEnvironment, upload_environment_dir};
