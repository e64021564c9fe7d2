//! `runner tasks ...`: inspect, check and create tasks and datasets.

mod digest;

use std::path::PathBuf;

use super::view::TextFormat;
use crate::exit::{CliError, Family, Outcome};

/// `runner tasks` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TasksCommand {
    /// Print the content digest of each task and of the dataset.
    #[command(after_help = crate::exit::help_text(Family::Tasks))]
    Digest {
        /// A task directory or a dataset directory.
        path: PathBuf,
        /// Output format: `json` prints one `runner.digest/v1` document.
        #[arg(long, value_enum, default_value_t = TextFormat::Text)]
        format: TextFormat,
    },
}

/// Runs a `runner tasks` subcommand.
pub fn run(command: TasksCommand) -> Result<Outcome, CliError> {
    match command {
        TasksCommand::Digest { path, format } => digest::digest(&path, format),
    }
}
