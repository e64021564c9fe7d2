//! Command-line interface.

use clap::{Parser, Subcommand};

use crate::commands;

/// `runner --version`: the version, the commit it was built from and the target.
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("RUNNER_GIT_COMMIT_SHOWN"),
    "\ntarget: ",
    env!("RUNNER_BUILD_TARGET"),
    "\nprofile: ",
    env!("RUNNER_BUILD_PROFILE"),
);

/// The command line of `runner`.
#[derive(Debug, Parser)]
#[command(
    name = "runner",
    version,
    long_version = LONG_VERSION,
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
    /// Inspect tasks and datasets.
    #[command(subcommand)]
    Tasks(commands::tasks::TasksCommand),
    /// Check job directories against leaderboard submission rules, offline.
    ValidateSubmission(commands::validate::ValidateSubmissionArgs),
    /// Check ATIF trajectory files.
    ValidateTrajectory(commands::validate::ValidateTrajectoryArgs),
    /// Write a publishable copy of a job directory with every known secret removed.
    Scrub(commands::scrub::ScrubArgs),
    /// Write a static HTML report of job directories (trials, logs, trajectories).
    View(commands::view::ViewArgs),
    /// Print the end-of-run summary of any job directory (runner's or Harbor's).
    Summary(commands::view::SummaryArgs),
    /// Compare two jobs task by task: the difference in mean with its interval and a paired test.
    Compare(commands::view::CompareArgs),
    /// Print a shell completion script (e.g. `runner completions bash > ~/.local/share/bash-completion/completions/runner`).
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Pull or build a dataset's images ahead of a run; remove runner's unused images.
    #[command(subcommand)]
    Images(commands::images::ImagesCommand),
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn long_version_names_the_commit_and_completions_cover_every_subcommand() {
        let version = Cli::command().render_long_version();
        assert!(
            version.contains("commit: ") && version.contains("target: "),
            "{version}"
        );
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "runner", &mut script);
            let script = String::from_utf8(script).expect("completion scripts are text");
            for sub in [
                "run",
                "validate-submission",
                "scrub",
                "view",
                "summary",
                "compare",
            ] {
                assert!(script.contains(sub), "{shell:?} completion lacks {sub}");
            }
        }
    }

    /// `--help` of the program and of every subcommand, as users see it.
    #[test]
    fn help_snapshots() {
        insta::assert_snapshot!("help", Cli::command().render_long_help().to_string());
        for path in [
            &["run"][..],
            &["tasks", "digest"],
            &["validate-submission"],
            &["validate-trajectory"],
            &["scrub"],
            &["view"],
            &["summary"],
            &["compare"],
            &["images", "pull"],
            &["images", "prune"],
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
