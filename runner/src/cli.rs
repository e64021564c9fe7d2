//! Command-line interface.

use clap::{Parser, Subcommand};

use crate::commands;

/// The command line of `runner`.
#[derive(Debug, Parser)]
#[command(
    name = "runner",
    version,
    propagate_version = true,
    about = "Run AI-agent benchmarks in the Harbor task format (Terminal-Bench and its peers) in Docker",
    long_about = "Run AI-agent benchmarks in the Harbor task format (Terminal-Bench and its peers) in \
        Docker, and write job directories Harbor's own tools read. Check leaderboard submissions \
        offline before you upload, and make publishable copies of job directories with every known \
        secret removed.",
    after_help = "Start with:\n  runner run --path tasks/examples --agent oracle --k 5\n\n\
        See `runner <COMMAND> --help` for each command's flags and exit codes."
)]
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
    /// Work with job directories: `jobs resume` continues one.
    #[command(subcommand)]
    Jobs(commands::jobs::JobsCommand),
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

    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// `--help` of the program and of every subcommand, as users see it.
    #[test]
    fn help_snapshots() {
        insta::assert_snapshot!("help", Cli::command().render_long_help().to_string());
        for path in [
            &["run"][..],
            &["jobs", "resume"],
            &["tasks", "digest"],
            &["validate-submission"],
            &["validate-trajectory"],
            &["scrub"],
        ] {
            let mut command = Cli::command();
            let mut sub = &mut command;
            for name in path {
                sub = sub
                    .find_subcommand_mut(name)
                    .expect("the subcommand exists");
            }
            let name = format!("help-{}", path.join("-"));
            insta::assert_snapshot!(name, sub.render_long_help().to_string());
        }
    }
}
