//! `runner tasks ...`: inspect tasks and datasets.

use std::path::PathBuf;

use tasks::Dataset;

use crate::exit::{CliError, Family, Outcome};
use crate::{note, say};

/// `runner tasks` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TasksCommand {
    /// Print the content digest of each task and of the dataset.
    #[command(after_help = crate::exit::help_text(Family::Tasks))]
    Digest {
        /// A task directory or a dataset directory.
        path: PathBuf,
    },
}

/// Runs a `runner tasks` subcommand.
pub fn run(command: TasksCommand) -> Result<Outcome, CliError> {
    match command {
        TasksCommand::Digest { path } => digest(&path),
    }
}

fn digest(path: &std::path::Path) -> Result<Outcome, CliError> {
    let dataset = Dataset::load(path).map_err(CliError::bad_input)?;
    for task in &dataset.tasks {
        say!("{}  {}", task.digest, task.name);
    }
    for err in &dataset.skipped {
        note!("skipped: {err}");
    }
    if !dataset.single_task {
        say!("{}  {} (dataset)", dataset.digest(), dataset.name);
    }
    if dataset.skipped.is_empty() {
        Ok(Outcome::Success)
    } else {
        Err(CliError::bad_input(format!(
            "{} malformed task(s) skipped",
            dataset.skipped.len()
        )))
    }
}
