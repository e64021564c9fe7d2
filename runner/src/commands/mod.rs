//! One module per subcommand; each returns its documented exit code.

pub mod installed;
pub mod run;
pub mod scrub;
pub mod tasks;
pub mod validate;

use crate::cli::Command;

/// Runs a subcommand and returns its exit code.
pub fn dispatch(command: Command) -> u8 {
    match command {
        Command::Run(args) => run::run(args),
        Command::Tasks(cmd) => tasks::run(cmd),
        Command::ValidateSubmission(args) => validate::validate_submission(args),
        Command::ValidateTrajectory(args) => validate::validate_trajectory(args),
        Command::Scrub(args) => scrub::run(args),
    }
}
