//! Command-line interface.

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::commands;
use crate::output::ColorChoice;

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
        See `runner <COMMAND> --help` for each command's flags and exit codes. The common flags of \
        `run` can also be set by RUNNER_* variables (named in `runner run --help`; the command \
        line wins); RUNNER_LOG sets the log level (e.g. debug)."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Print only results, warnings and errors: no live view, no progress lines, no notes.
    #[arg(short = 'q', long, global = true, env = "RUNNER_QUIET")]
    pub quiet: bool,
    /// When to colour output: auto (a terminal, unless NO_COLOR is set; CLICOLOR_FORCE forces
    /// it), always or never.
    #[arg(
        long,
        value_enum,
        global = true,
        default_value_t,
        value_name = "WHEN",
        env = "RUNNER_COLOR"
    )]
    pub color: ColorChoice,
}

/// Parses `argv`; for `run`, also records which of its flags the command line or a `RUNNER_*`
/// variable gave, so a job config file (`-c`) fills in only the others.
pub fn try_parse_from<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let command = command();
    let matches = command.clone().try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let (Command::Run(args), Some(("run", sub))) = (&mut cli.command, matches.subcommand()) {
        let run = command.find_subcommand("run").expect("run is a subcommand");
        let on_command_line = given_flags(run, sub, &[ValueSource::CommandLine]);
        if on_command_line.contains("resume") && on_command_line.contains("jobs_dir") {
            return Err(Cli::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "--resume JOB_DIR continues that directory; --jobs-dir cannot be used with it",
            ));
        }
        args.choices.given = given_flags(
            run,
            sub,
            &[ValueSource::CommandLine, ValueSource::EnvVariable],
        );
    }
    Ok(cli)
}

/// The command line as users meet it. The global `-q/--quiet` and `--color` are explained
/// once, in `runner --help`; each subcommand's help hides them (its exit-code text points
/// there) instead of repeating both blocks on every page.
pub fn command() -> clap::Command {
    let mut command = Cli::command();
    let hidden: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .map(|arg| arg.clone().hide(true))
        .collect();
    // Each subcommand gets its own hidden copy before the command is built: clap propagates
    // a global flag only to subcommands that lack one of that id, and a copy that is itself
    // global carries on to nested subcommands. Values still reach `Cli` by id.
    for sub in command.get_subcommands_mut() {
        *sub = std::mem::take(sub).args(hidden.iter().cloned());
    }
    command
}

/// [`try_parse_from`] of this process's argv; exits with clap's message on bad usage.
pub fn parse() -> Cli {
    try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// The ids of `command`'s arguments whose value came from one of `sources`. Only arguments:
/// the matches also hold the ids of argument groups (each flattened struct is one, named
/// after the struct), which are no flag a user gave.
fn given_flags(
    command: &clap::Command,
    matches: &clap::ArgMatches,
    sources: &[ValueSource],
) -> BTreeSet<String> {
    matches
        .ids()
        .filter(|id| command.get_arguments().any(|arg| arg.get_id() == *id))
        .filter(|id| {
            matches
                .value_source(id.as_str())
                .is_some_and(|source| sources.contains(&source))
        })
        .map(|id| id.as_str().to_owned())
        .collect()
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
    /// Leaderboard submissions: `submission prepare` writes the folder a pull request adds.
    #[command(subcommand)]
    Submission(commands::submission::SubmissionCommand),
    /// Write a static HTML report of job directories (trials, logs, trajectories).
    View(commands::view::ViewArgs),
    /// Print the end-of-run summary of any job directory (runner's or Harbor's).
    Summary(commands::view::SummaryArgs),
    /// Compare two jobs task by task: the difference in mean with its interval and a paired test.
    Compare(commands::view::CompareArgs),
    /// Join the shards of a `run --shard I/N` split (or jobs of one plan) into one job directory.
    Merge(commands::merge::MergeArgs),
    /// Print a shell completion script (e.g. `runner completions bash > ~/.local/share/bash-completion/completions/runner`).
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Pull or build a dataset's images ahead of a run; remove runner's unused images.
    #[command(subcommand)]
    Images(commands::images::ImagesCommand),
    /// Serve a dataset's tasks as an OpenEnv environment (HTTP and WebSocket) for trainers:
    /// each session a fresh task container, graded by the task's own verifier.
    Serve(commands::serve::ServeArgs),
    /// Datasets by name in a registry: `datasets list` shows them, `datasets download` writes
    /// one as a plain dataset folder.
    #[command(subcommand)]
    Datasets(commands::datasets::DatasetsCommand),
    /// The agents `run -a NAME` takes: `agents list`.
    #[command(subcommand)]
    Agents(commands::agents::AgentsCommand),
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
    fn global_flags_still_parse_after_a_subcommand_whose_help_hides_them() {
        let cli = try_parse_from(["runner", "summary", "j", "-q", "--color", "never"]).unwrap();
        assert!(cli.quiet);
        let help = try_parse_from(["runner", "summary", "--help"])
            .unwrap_err()
            .render()
            .to_string();
        assert!(!help.contains("-q, --quiet"), "{help}");
        let top = command().render_long_help().to_string();
        assert!(top.contains("--quiet") && top.contains("--color"), "{top}");
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

    #[test]
    fn resume_refuses_a_jobs_dir_on_the_command_line() {
        let err = try_parse_from([
            "runner", "run", "-a", "nop", "-p", "d", "--resume", "j", "-o", "x",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert!(try_parse_from(["runner", "run", "-a", "nop", "-p", "d", "--resume", "j"]).is_ok());
    }

    /// `--help` of the program and of every subcommand, as users see it.
    #[test]
    fn help_snapshots() {
        insta::assert_snapshot!("help", Cli::command().render_long_help().to_string());
        for path in [
            &["run"][..],
            &["jobs", "resume"],
            &["tasks", "digest"],
            &["tasks", "check"],
            &["tasks", "init"],
            &["validate-submission"],
            &["validate-trajectory"],
            &["scrub"],
            &["view"],
            &["summary"],
            &["compare"],
            &["merge"],
            &["images", "pull"],
            &["images", "prune"],
            &["serve"],
            &["datasets", "list"],
            &["datasets", "download"],
        ] {
            let argv = std::iter::once("runner")
                .chain(path.iter().copied())
                .chain(["--help"]);
            let help = try_parse_from(argv).expect_err("--help ends the parse");
            assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
            let name = format!("help-{}", path.join("-"));
            insta::assert_snapshot!(name, help.render().to_string());
        }
    }
}
