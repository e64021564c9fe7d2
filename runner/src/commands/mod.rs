//! One module per subcommand; each returns `Result<CommandOutcome, CliError>` and leaves the exit
//! code to `exit.rs`.

pub mod agent;
pub mod agents;
pub mod dataset_source;
pub mod datasets;
pub mod images;
pub mod jobs;
pub mod merge;
pub mod run;
pub mod scrub;
pub mod serve;
pub mod submission;
pub mod tasks;
pub mod validate;
pub mod view;

use crate::cli::Command;
use crate::exit::{CliError, CommandOutcome};

/// Runs a subcommand.
pub fn dispatch(command: Command) -> Result<CommandOutcome, CliError> {
    match command {
        Command::Run(args) => run::run(*args),
        Command::Tasks(cmd) => tasks::run(cmd),
        Command::Jobs(cmd) => jobs::run(cmd),
        Command::ValidateSubmission(args) => validate::validate_submission(args),
        Command::ValidateTrajectory(args) => validate::validate_trajectory(args),
        Command::Scrub(args) => scrub::run(args),
        Command::Submission(cmd) => submission::run(cmd),
        Command::View(args) => view::view(args),
        Command::Summary(args) => view::summary(args),
        Command::Compare(args) => view::compare(args),
        Command::Merge(args) => merge::merge(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = crate::cli::Cli::command();
            clap_complete::generate(shell, &mut command, "runner", &mut std::io::stdout());
            Ok(CommandOutcome::Success)
        }
        Command::Images(cmd) => images::run(cmd),
        Command::Serve(args) => serve::serve(args),
        Command::Datasets(cmd) => datasets::run(cmd),
        Command::Agents(cmd) => agents::run(cmd),
    }
}

/// Runs `future` to its end on a new multi-threaded runtime: the async commands' entry.
pub fn block_on<T>(
    future: impl std::future::Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runner_because("cannot start the async runtime", e))?;
    runtime.block_on(future)
}
