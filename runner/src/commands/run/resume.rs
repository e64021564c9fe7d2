//! Continuing a job dir: `runner run --resume JOB_DIR` (with the job's flags, or alone, when
//! the invocation lock.json recorded is replayed) and `runner jobs resume -p JOB_DIR`, which
//! always replays it. Nobody should have to remember the flags of a run that died at 3 am.

use std::path::{Path, PathBuf};

use engine::job::resume::{ResumeError, ResumeReport};
use tasks::records::JobLock;

use super::{RunArgs, invocation};
use crate::cli::Command;
use crate::exit::CliError;
use crate::note;

/// Flags that still mean something when `--resume` replays the recorded invocation: what to
/// run again, what counts as success, and the global display flags.
const KEPT_ON_REPLAY: [&str; 5] = ["resume", "retry_failed", "min_coverage", "quiet", "color"];

/// The flags a replay of the recorded invocation takes from its own command line (those of
/// [`KEPT_ON_REPLAY`] that are not global): which trials run again and what counts as
/// success. `runner run` and `runner jobs resume` declare them once, here, so both spell and
/// check them alike; `run` adds its own rule (`-f` needs `--resume`). No argument group of its
/// own: nothing needs one, and clap would add its id to the matches beside the flags.
#[derive(Debug, clap::Args)]
#[group(skip)]
pub struct ReplayArgs {
    /// Also run again the resumed job's trials that ended with this exception type or family
    /// (or outcome: infra_error, agent_error), keeping the old attempt; repeatable.
    /// Interrupted trials always run again.
    #[arg(
        short = 'f',
        long = "retry-failed",
        visible_alias = "filter-error-type",
        value_name = "TYPE"
    )]
    pub retry_failed: Vec<String>,
    /// Exit 0 when at least this share of the planned trials is scored (0 to 1), instead of
    /// requiring every trial to have a result.
    #[arg(long, value_name = "FRACTION", env = "RUNNER_MIN_COVERAGE", value_parser = super::parse_fraction)]
    pub min_coverage: Option<f64>,
}

/// True when `args` is `--resume JOB_DIR` without the dataset or the agent, so the job's
/// recorded invocation supplies them (and every other flag of the run).
pub fn resumes_alone(args: &RunArgs) -> bool {
    args.resume.is_some()
        && args.path.as_os_str().is_empty()
        && args.source.dataset.is_none()
        && args.agent.is_none()
        && args.agent_config.is_none()
        && args.choices.config.is_none()
}

/// The arguments of `runner run --resume JOB_DIR` given alone: the recorded invocation, with
/// this command line's `--retry-failed` and `--min-coverage`. Any other flag is refused by
/// name rather than dropped: the replay would not honour it.
pub fn replayed_for_resume(args: RunArgs) -> Result<RunArgs, CliError> {
    let ignored: Vec<String> = args
        .choices
        .given
        .iter()
        .filter(|id| !KEPT_ON_REPLAY.contains(&id.as_str()))
        .map(|id| flag_name(id))
        .collect();
    let job_dir = args.resume.clone().expect("resumes_alone checked --resume");
    if !ignored.is_empty() {
        return Err(CliError::bad_input(format!(
            "--resume {} without --path and --agent replays the job's recorded invocation, so {} \
             would be ignored; give the job's full flags with it, or leave {} out",
            job_dir.display(),
            ignored.join(", "),
            if ignored.len() == 1 { "it" } else { "them" }
        )));
    }
    replayed(&job_dir, args.replay, "--resume")
}

/// The `runner run` arguments that resume `job_dir` as it was started: its lock.json's
/// invocation replayed, then `kept`'s `retry_failed` and (when given) `min_coverage` applied.
/// `flag` names the option that gave `job_dir`, for errors.
pub fn replayed(job_dir: &Path, kept: ReplayArgs, flag: &str) -> Result<RunArgs, CliError> {
    let lock_path = job_dir.join("lock.json");
    let bytes =
        tasks::bounded::read_capped(&lock_path, tasks::bounded::MAX_RECORD_BYTES, "job record")
            .map_err(|e| {
                CliError::bad_input(format!(
                    "{flag} {}: cannot read {}: {e}; is it a job directory?",
                    job_dir.display(),
                    lock_path.display()
                ))
            })?;
    let lock: JobLock = serde_json::from_slice(&bytes).map_err(|e| {
        CliError::bad_input_because(
            format!("{}: not a runner lock file", lock_path.display()),
            e,
        )
    })?;
    let mut args = replay(&lock, &lock_path, |name| std::env::var(name).ok())?;
    args.resume = Some(job_dir.to_path_buf());
    args.job_name = None;
    args.replay.retry_failed = kept.retry_failed;
    if kept.min_coverage.is_some() {
        args.replay.min_coverage = kept.min_coverage;
    }
    note!(
        "resuming {} with its recorded invocation: {}",
        job_dir.display(),
        lock.invocation.join(" ")
    );
    Ok(args)
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
        if let Some(config) = &mut args.choices.config {
            resolve(config);
        }
        if let Some(registry) = &mut args.source.registry.registry_path {
            resolve(registry);
        }
    }
    // A replay of a replay (`run --resume J` alone, recorded as such) would find no flags:
    // the job keeps the invocation that started it.
    args.recorded_invocation = Some((lock.invocation.clone(), lock.working_dir.clone()));
    Ok(args)
}

/// `--long-name` of the `runner run` argument whose clap id is `id`.
fn flag_name(id: &str) -> String {
    let command = <RunArgs as clap::Args>::augment_args(clap::Command::new("run"));
    command
        .get_arguments()
        .find(|arg| arg.get_id().as_str() == id)
        .and_then(|arg| arg.get_long())
        .map_or_else(
            || format!("--{}", id.replace('_', "-")),
            |long| format!("--{long}"),
        )
}

/// `--resume JOB_DIR`: its jobs dir, its name and itself; it must be a directory.
pub fn existing_job_dir(dir: &Path) -> Result<(PathBuf, String, PathBuf), CliError> {
    if !dir.is_dir() {
        return Err(CliError::bad_input(format!(
            "--resume {}: not a job directory (it does not exist or is not a directory)",
            dir.display()
        )));
    }
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            CliError::bad_input(format!(
                "--resume {}: name the job directory itself",
                dir.display()
            ))
        })?;
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    Ok((parent, name, dir.to_path_buf()))
}

/// A failed resume as the CLI reports it: a record the file system would not read or move is
/// the runner's failure (exit 4, as for any record), a job dir that does not match is bad input.
pub fn resume_error(error: ResumeError) -> CliError {
    match error {
        ResumeError::Io { .. } => CliError::runner(error),
        _ => CliError::bad_input(error),
    }
}

/// Says what the resume found: recovered attempts, trials kept, run again and new.
pub fn note_resume(report: &ResumeReport, job_dir: &Path) {
    for trial in &report.recovered {
        note!("finished moving an interrupted attempt of {trial} under attempts/");
    }
    note!(
        "resuming {}: {} trial(s) complete and kept, {} to run again, {} new",
        job_dir.display(),
        report.complete,
        report.rerun.len(),
        report.new
    );
    for (trial, why) in &report.rerun {
        note!("  {trial}: {why}; the old attempt is kept under {trial}/attempts/");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(invocation: &[&str], working_dir: Option<&str>) -> JobLock {
        JobLock {
            engine_images: Default::default(),
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

    fn parsed(argv: &[&str]) -> RunArgs {
        let cli = crate::cli::try_parse_from(argv.iter().copied()).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not a run")
        };
        *args
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
        assert!(err.to_string().contains("runner run --resume"), "{err}");
    }

    #[test]
    fn resume_alone_parses_and_is_recognised_as_a_replay() {
        let alone = parsed(&[
            "runner",
            "run",
            "--resume",
            "jobs/j",
            "--retry-failed",
            "infra_error",
        ]);
        assert!(resumes_alone(&alone));
        let full = parsed(&[
            "runner", "run", "--resume", "jobs/j", "-p", "d", "-a", "oracle",
        ]);
        assert!(!resumes_alone(&full));
    }

    /// `run` and `jobs resume` take the replay flags under both spellings; `run` only with
    /// `--resume`.
    #[test]
    fn both_commands_take_the_replay_flags_alike() {
        for spelling in ["-f", "--retry-failed", "--filter-error-type"] {
            let args = parsed(&["runner", "run", "--resume", "j", spelling, "infra_error"]);
            assert_eq!(args.replay.retry_failed, ["infra_error"], "{spelling}");
            let cli = crate::cli::try_parse_from([
                "runner",
                "jobs",
                "resume",
                "-p",
                "j",
                spelling,
                "infra_error",
                "--min-coverage",
                "0.5",
            ])
            .unwrap();
            let Command::Jobs(crate::commands::jobs::JobsCommand::Resume(resume)) = cli.command
            else {
                panic!("not jobs resume")
            };
            assert_eq!(resume.replay.retry_failed, ["infra_error"], "{spelling}");
            assert_eq!(resume.replay.min_coverage, Some(0.5));
        }
        let err = crate::cli::try_parse_from([
            "runner",
            "run",
            "-a",
            "nop",
            "-p",
            "d",
            "-f",
            "infra_error",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn a_flag_the_replay_would_drop_is_refused_by_its_name() {
        let mut args = parsed(&["runner", "run", "--resume", "/nonexistent/j", "-n", "8"]);
        assert!(resumes_alone(&args));
        let err = replayed_for_resume(args).unwrap_err();
        assert!(
            err.to_string().contains("--n-concurrent would be ignored"),
            "{err}"
        );
        args = parsed(&[
            "runner",
            "run",
            "--resume",
            "/nonexistent/j",
            "--min-coverage",
            "0.9",
        ]);
        let err = replayed_for_resume(args).unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot read /nonexistent/j/lock.json"),
            "kept flags pass through to reading the lock: {err}"
        );
        // A flag of a flattened struct is named alone, never with the struct's group id.
        args = parsed(&["runner", "run", "--resume", "/nonexistent/j", "-i", "x"]);
        let err = replayed_for_resume(args).unwrap_err().to_string();
        assert!(
            err.contains("so --include-task-name would be ignored"),
            "{err}"
        );
        assert!(!err.contains("SelectionArgs"), "{err}");
    }

    #[test]
    fn an_unreadable_record_is_the_runners_failure_and_a_mismatch_is_bad_input() {
        let io = ResumeError::Io {
            path: PathBuf::from("j/t/result.json"),
            source: std::io::Error::other("is a directory"),
        };
        assert_eq!(crate::exit::ExitCode::of(&Err(resume_error(io))).code(), 4);
        let differs = ResumeError::Differs {
            dir: PathBuf::from("j"),
            differences: vec!["k: 1 then 2".into()],
        };
        assert_eq!(
            crate::exit::ExitCode::of(&Err(resume_error(differs))).code(),
            2
        );
    }
}
