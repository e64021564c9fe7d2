//! One module per subcommand; each returns `Result<Outcome, CliError>` and leaves the exit
//! code to `exit.rs`.

pub mod agent;
pub mod jobs;
pub mod run;
pub mod scrub;
pub mod tasks;
pub mod validate;

use crate::cli::Command;
use crate::exit::{CliError, Outcome};

/// Runs a subcommand.
pub fn dispatch(command: Command) -> Result<Outcome, CliError> {
    match command {
        Command::Run(args) => run::run(*args),
        Command::Tasks(cmd) => tasks::run(cmd),
        Command::Jobs(cmd) => jobs::run(cmd),
        Command::ValidateSubmission(args) => validate::validate_submission(args),
        Command::ValidateTrajectory(args) => validate::validate_trajectory(args),
        Command::Scrub(args) => scrub::run(args),
    }
}
