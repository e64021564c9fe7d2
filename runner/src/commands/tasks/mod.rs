//! `runner tasks ...`: inspect, check and create tasks and datasets.

mod check;
mod digest;
mod init;

use std::path::PathBuf;

use super::dataset_source::DatasetSourceArgs;
use super::view::TextFormat;
use crate::exit::{CliError, CommandOutcome, Family};

/// `runner tasks` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TasksCommand {
    /// Print the content digest of each task and of the dataset; with --check, compare them
    /// with a published manifest.
    #[command(after_help = crate::exit::help_text(Family::Tasks))]
    Digest {
        /// A task directory or a dataset directory (or -d NAME[@VERSION]).
        #[arg(required_unless_present = "dataset")]
        path: Option<PathBuf>,
        /// -d/--dataset NAME[@VERSION] with --registry-url/--registry-path: a dataset by name.
        #[command(flatten)]
        source: DatasetSourceArgs,
        /// Compare the dataset at PATH with this published manifest (Harbor's dataset.toml with
        /// each task's name and digest): every task listed, at its digest, and no other.
        /// Exit 1 names each difference.
        #[arg(long, value_name = "MANIFEST")]
        check: Option<PathBuf>,
        /// Output format: `json` prints one `runner.digest/v1` document.
        #[arg(long, value_enum, default_value_t = TextFormat::Text)]
        format: TextFormat,
    },
    /// Check each task before anyone pays for a run: it loads cleanly, the oracle scores 1
    /// every time, the nop agent and reward-hack probes score 0, no answer leaks to the agent,
    /// nothing is downloaded at test time. Runs real trials (Docker).
    #[command(after_help = crate::exit::help_text(Family::Check))]
    Check(check::CheckArgs),
    /// Write a new task directory to start from (task.toml with the schema's fields
    /// commented, instruction.md, environment/Dockerfile, tests/test.sh with named checks,
    /// solution/solve.sh); it passes `tasks check` as written.
    #[command(after_help = crate::exit::help_text(Family::Init))]
    Init {
        /// The task's name, `name` or `org/name`; the directory is its last part.
        name: String,
        /// The folder to write the task directory in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

/// Runs a `runner tasks` subcommand.
pub fn run(command: TasksCommand) -> Result<CommandOutcome, CliError> {
    match command {
        TasksCommand::Digest {
            path,
            source,
            check,
            format,
        } => {
            let path = source.dir_or(path)?;
            match check {
                Some(manifest) => digest::check(&manifest, &path, format),
                None => digest::digest(&path, format),
            }
        }
        TasksCommand::Check(args) => check::run(args),
        TasksCommand::Init { name, dir } => init::init(&name, &dir),
    }
}
