//! `runner submission ...`: turning finished jobs into a leaderboard submission.

mod metadata;
mod prepare;

use crate::exit::{CliError, CommandOutcome};

pub use prepare::PrepareArgs;

/// `runner submission` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum SubmissionCommand {
    /// Write the folder a leaderboard pull request adds: scrubbed copies of the job dirs, a
    /// pre-filled metadata.yaml and the validation report. Refuses an invalid submission.
    Prepare(PrepareArgs),
}

/// Runs a `runner submission` subcommand.
pub fn run(command: SubmissionCommand) -> Result<CommandOutcome, CliError> {
    match command {
        SubmissionCommand::Prepare(args) => prepare::prepare(args),
    }
}
