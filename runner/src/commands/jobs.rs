//! `runner jobs resume -p JOB_DIR`, as Harbor spells it: continue a job with the invocation
//! its lock.json recorded, so nobody has to remember the flags of a run that died at 3 am.

use std::path::{Path, PathBuf};

use tasks::records::JobLock;

use super::run::{self, RunArgs, invocation};
use crate::cli::Command;
use crate::exit::{CliError, Family, Outcome};
use crate::note;

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
    /// Also run again the trials that ended with this exception type or family (or outcome:
    /// infra_error, agent_error), keeping the old attempt; repeatable. Interrupted trials
    /// always run again.
    #[arg(
        short = 'f',
        long = "filter-error-type",
        visible_alias = "retry-failed",
        value_name = "TYPE"
    )]
    pub retry_failed: Vec<String>,
    /// Exit 0 when at least this share of the planned trials is scored (0 to 1).
    #[arg(long, value_name = "FRACTION", value_parser = run::parse_fraction)]
    pub min_coverage: Option<f64>,
}

/// Runs `runner jobs …`.
pub fn run(command: JobsCommand) -> Result<Outcome, CliError> {
    match command {
        JobsCommand::Resume(args) => resume(args),
    }
}

fn resume(args: JobsResumeArgs) -> Result<Outcome, CliError> {
    let lock_path = args.job_path.join("lock.json");
    let bytes =
        tasks::bounded::read_capped(&lock_path, tasks::bounded::MAX_RECORD_BYTES, "job record")
            .map_err(|e| {
                CliError::bad_input(format!(
                    "-p {}: cannot read {}: {e}; is it a job directory?",
                    args.job_path.display(),
                    lock_path.display()
                ))
            })?;
    let lock: JobLock = serde_json::from_slice(&bytes).map_err(|e| {
        CliError::bad_input(format!(
            "{}: not a runner lock file: {e}",
            lock_path.display()
        ))
    })?;
    let mut run_args = replay(&lock, &lock_path, |name| std::env::var(name).ok())?;
    run_args.resume = Some(args.job_path.clone());
    run_args.job_name = None;
    run_args.retry_failed = args.retry_failed;
    if args.min_coverage.is_some() {
        run_args.min_coverage = args.min_coverage;
    }
    note!(
        "resuming {} with its recorded invocation: {}",
        args.job_path.display(),
        lock.invocation.join(" ")
    );
    run::run(run_args)
}

/// The `runner run` arguments `lock` recorded, with redacted agent env read from `env` and
/// relative paths resolved against the recorded working directory.
fn replay(
    lock: &JobLock,
    lock_path: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<RunArgs, CliError> {
    let start = lock
        .invocation
        .iter()
        .position(|arg| arg == "run")
        .ok_or_else(|| {
            CliError::bad_input(format!(
                "{}: the recorded invocation {:?} is not a `runner run`; resume with `runner run --resume` and the job's flags",
                lock_path.display(),
                lock.invocation
            ))
        })?;
    let argv = std::iter::once("runner".to_owned()).chain(lock.invocation[start..].iter().cloned());
    let cli = crate::cli::try_parse_from(argv).map_err(|e| {
        CliError::bad_input(format!(
            "{}: the recorded invocation no longer parses ({}); resume with `runner run --resume` and the job's flags",
            lock_path.display(),
            e.kind()
        ))
    })?;
    let Command::Run(args) = cli.command else {
        unreachable!("the invocation starts with `run`");
    };
    let mut args = *args;
    args.agent_env = invocation::restore_agent_env(&args.agent_env, lock_path, env)?;
    if let Some(dir) = &lock.working_dir {
        let base = Path::new(dir);
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        resolve(&mut args.path);
        resolve(&mut args.jobs_dir);
        if let Some(config) = &mut args.agent_config {
            resolve(config);
        }
        if let Some(config) = &mut args.steering.config {
            resolve(config);
        }
    }
    args.recorded_invocation = Some((lock.invocation.clone(), lock.working_dir.clone()));
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(invocation: &[&str], working_dir: Option<&str>) -> JobLock {
        JobLock {
            schema_version: 1,
            created_at: chrono::Utc::now(),
            harbor: Default::default(),
            runner: Default::default(),
            invocation: invocation.iter().map(|s| (*s).to_owned()).collect(),
            working_dir: working_dir.map(str::to_owned),
            n_concurrent_trials: 4,
            retry: Default::default(),
            trials: Vec::new(),
            dataset_digest: None,
            images: Default::default(),
            allow_container_secrets: false,
        }
    }

    #[test]
    fn the_recorded_invocation_replays_with_paths_and_secrets_restored() {
        let lock = lock(
            &[
                "/usr/bin/runner",
                "run",
                "--path",
                "tasks/examples",
                "--agent-config",
                "agents/a.toml",
                "--agent-env",
                "API_KEY=<redacted>",
                "--k",
                "5",
                "--max-retries",
                "3",
            ],
            Some("/work/repo"),
        );
        let args = replay(&lock, Path::new("lock.json"), |n| {
            (n == "API_KEY").then(|| "k-1".to_owned())
        })
        .unwrap();
        assert_eq!(args.path, Path::new("/work/repo/tasks/examples"));
        assert_eq!(
            args.agent_config.as_deref(),
            Some(Path::new("/work/repo/agents/a.toml"))
        );
        assert_eq!(args.agent_env, vec!["API_KEY=k-1"]);
        assert_eq!((args.k, args.max_retries), (5, 3));
        assert_eq!(
            args.recorded_invocation.as_ref().map(|(i, _)| i.len()),
            Some(12),
            "the original invocation stays the job's record"
        );
    }

    #[test]
    fn an_invocation_that_is_not_a_run_is_refused() {
        let err = replay(
            &lock(&["runner", "scrub", "x"], None),
            Path::new("lock.json"),
            |_| None,
        )
        .unwrap_err();
        assert!(err.message.contains("runner run --resume"), "{err}");
    }
}
