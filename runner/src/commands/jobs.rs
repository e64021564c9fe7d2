//! `runner jobs resume -p JOB_DIR`, as Harbor spells it: continue a job with the invocation
//! its lock.json recorded, so nobody has to remember the flags of a run that died at 3 am.

use std::path::PathBuf;

use super::run;
use crate::exit::{CliError, CommandOutcome, Family};

/// `runner jobs …`.
#[derive(Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// Continue a job that stopped (killed, interrupted, or with trials to run again) with the
    /// flags it was started with.
    Resume(JobsResumeArgs),
}

/// Arguments of `runner jobs resume`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Run))]
pub struct JobsResumeArgs {
    /// The job directory (it holds config.json and lock.json).
    #[arg(short = 'p', long = "job-path", value_name = "JOB_DIR")]
    pub job_path: PathBuf,
    /// --retry-failed and --min-coverage, as `runner run --resume` takes them.
    #[command(flatten)]
    pub replay: run::resume::ReplayArgs,
}

/// Runs `runner jobs …`.
pub fn run(command: JobsCommand) -> Result<CommandOutcome, CliError> {
    match command {
        JobsCommand::Resume(args) => resume(args),
    }
}

fn resume(args: JobsResumeArgs) -> Result<CommandOutcome, CliError> {
    let run_args = run::resume::replayed(&args.job_path, args.replay, "-p")?;
    run::run(run_args)
}
