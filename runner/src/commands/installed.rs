//! `runner run --agent-config`: jobs with an installed agent.

use std::path::Path;

use tasks::Dataset;

use super::run::RunArgs;
use crate::exit_codes;

/// Runs a job with the installed agent described by `config`.
pub async fn run_installed(_args: &RunArgs, config: &Path, _dataset: Dataset) -> u8 {
    eprintln!("error: {}: installed agents are not wired in yet", config.display());
    exit_codes::BAD_INPUT
}
