//! Command-line interface.

use clap::{Parser, Subcommand};

use crate::commands;

/// Runs Harbor-format agent benchmarks in Docker, faster and more honestly.
#[derive(Debug, Parser)]
#[command(name = "runner", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run k trials of every task of a dataset with an agent.
    Run(Box<commands::run::RunArgs>),
    /// Inspect tasks and datasets.
    #[command(subcommand)]
    Tasks(commands::tasks::TasksCommand),
    /// Check job directories against leaderboard submission rules, offline.
    ValidateSubmission(commands::validate::ValidateSubmissionArgs),
    /// Check ATIF trajectory files.
    ValidateTrajectory(commands::validate::ValidateTrajectoryArgs),
    /// Write a publishable copy of a job directory with every known secret removed.
    Scrub(commands::scrub::ScrubArgs),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
