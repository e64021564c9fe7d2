//! `runner run`: k trials of every task of a dataset with one agent.

use std::path::{Path, PathBuf};

use adapter::Agent;
use docker_backend::{DockerBackend, DockerClient, reap_dead_owners, remove_job_containers};
use engine::job::{JobOutcome, JobSettings, plan_job, run_job};
use tasks::{Dataset, Multipliers};
use tokio_util::sync::CancellationToken;

use crate::exit::{CliError, ExitCode, Family, Outcome};
use crate::report::{Reporter, print_summary};
use crate::{note, say};

/// Arguments of `runner run`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Run))]
pub struct RunArgs {
    /// A task directory or a dataset directory (a folder of task directories).
    #[arg(short = 'p', long)]
    pub path: PathBuf,
    /// A built-in agent: `oracle` (runs the task's solution) or `nop` (does nothing).
    #[arg(
        short = 'a',
        long,
        conflicts_with = "agent_config",
        required_unless_present = "agent_config"
    )]
    pub agent: Option<String>,
    /// An installed agent described by a TOML agent config.
    #[arg(long)]
    pub agent_config: Option<PathBuf>,
    /// Trials per task.
    #[arg(
        short = 'k',
        long = "k",
        visible_alias = "n-attempts",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub k: u32,
    /// Trials run at once.
    #[arg(short = 'n', long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub n_concurrent: u32,
    /// Where job directories are written.
    #[arg(short = 'o', long, default_value = "jobs")]
    pub jobs_dir: PathBuf,
    /// The job directory's name (default: the local time, as Harbor names jobs).
    #[arg(long, value_parser = parse_job_name)]
    pub job_name: Option<String>,
    /// Build from environment/Dockerfile even when a task names a prebuilt docker_image
    /// (Harbor's --force-build; the build cache is used).
    #[arg(long)]
    pub force_build: bool,
    /// Pull and disk settings of task images.
    #[command(flatten)]
    pub images: super::images::ImageArgs,
    /// Harbor's timeout multipliers.
    #[command(flatten)]
    pub multipliers: Multipliers,
    /// Env var for the agent's container, NAME=VALUE (repeatable; installed agents only).
    #[arg(long = "agent-env", visible_alias = "ae", value_name = "NAME=VALUE")]
    pub agent_env: Vec<String>,
    /// Let credentials reach containers. Recorded in config.json and lock.json; the job is then
    /// not publishable.
    #[arg(long)]
    pub allow_container_secrets: bool,
    /// Refuse to upload an agent source tree with uncommitted changes.
    #[arg(long)]
    pub require_clean_source: bool,
    /// Most processes and threads per trial (default: max(1024, 256 × the task's cpus)).
    #[arg(long, value_parser = clap::value_parser!(u32).range(64..=4_194_304))]
    pub pids_limit: Option<u32>,
    /// Most MB of files one trial brings back to the host (agent logs and artifacts; verifier
    /// output has its own budget of at most 256 MB); past it a file is cut with a marker line
    /// and the trial records it.
    #[arg(long, default_value_t = engine::limits::DEFAULT_DOWNLOAD_CAP_BYTES >> 20,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_download_mb: u64,
    /// Most MB of trial.log per trial; past it command output is dropped after a marker line.
    #[arg(long, default_value_t = engine::limits::DEFAULT_TRIAL_LOG_CAP_BYTES >> 20,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_trial_log_mb: u64,
}

/// A job name is one directory name: no separators, not `.` or `..`.
fn parse_job_name(name: &str) -> Result<String, String> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        Err(format!(
            "{name:?} is not a directory name; use letters, digits, '-', '_' and '.' without '/'"
        ))
    } else {
        Ok(name.to_owned())
    }
}

/// Runs `runner run`.
pub fn run(args: RunArgs) -> Result<Outcome, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runner(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: RunArgs) -> Result<Outcome, CliError> {
    let dataset = Dataset::load(&args.path).map_err(CliError::bad_input)?;
    for skipped in &dataset.skipped {
        note!("skipping task: {skipped}");
    }
    for warning in dataset.tasks.iter().flat_map(|t| &t.warnings) {
        note!("warning: {warning}");
    }
    let agent = super::agent::choose(
        args.agent.as_deref(),
        args.agent_config.as_deref(),
        &args.agent_env,
        args.allow_container_secrets,
        args.require_clean_source,
    )?;
    if dataset.tasks.is_empty() {
        return Err(CliError::bad_input(format!(
            "{} has no runnable task",
            dataset.dir.display()
        )));
    }
    let job_name = args.job_name.clone().unwrap_or_else(|| {
        chrono::Local::now()
            .format("%Y-%m-%d__%H-%M-%S")
            .to_string()
    });
    let job_dir = check_job_dir(&args.jobs_dir, &job_name)?;
    let settings = JobSettings {
        job_name,
        jobs_dir: args.jobs_dir.display().to_string(),
        k: args.k,
        n_concurrent: args.n_concurrent,
        multipliers: args.multipliers,
        force_build: args.force_build,
        agent: agent.job_config(),
        allow_container_secrets: args.allow_container_secrets,
        instruction_suffix: agent.instruction_suffix().map(str::to_owned),
        invocation: redacted_invocation(),
        runner_commit: option_env!("RUNNER_GIT_COMMIT")
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
        limits: engine::LimitSettings {
            pids_limit: args.pids_limit,
            download_cap_bytes: args.max_download_mb << 20,
            trial_log_cap_bytes: args.max_trial_log_mb << 20,
            ..engine::LimitSettings::default()
        },
    };
    let plan = plan_job(&dataset, &settings);
    for skipped in &plan.skipped {
        note!("skipping task: {skipped}");
    }
    let any_skipped = !dataset.skipped.is_empty() || !plan.skipped.is_empty();
    if plan.trials.is_empty() {
        return Err(CliError::bad_input(format!(
            "no task of {} can run",
            dataset.dir.display()
        )));
    }
    let client = DockerClient::connect().await.map_err(CliError::bad_input)?;
    match reap_dead_owners(&client).await {
        Ok(0) => {}
        Ok(n) => note!("removed {n} container(s) left behind by runner processes that are gone"),
        Err(e) => note!("warning: could not reap leftover containers: {e}"),
    }
    let cancel = CancellationToken::new();
    spawn_signal_handler(client.clone(), plan.job_id.clone(), cancel.clone());
    note!(
        "job {} : {} trial(s), {} at once -> {}",
        plan.job_id,
        plan.trials.len(),
        settings.n_concurrent,
        job_dir.display()
    );
    let mut reporter = Reporter::new(plan.trials.len() as u64);
    let outcome = run_job(
        DockerBackend::with_policy(client, args.images.policy()),
        agent,
        plan,
        job_dir.clone(),
        &settings,
        cancel,
        |event| reporter.event(event),
    )
    .await;
    reporter.finish();
    let outcome = outcome.map_err(CliError::runner)?;
    report_outcome(&outcome, &job_dir);
    Ok(if outcome.interrupted {
        Outcome::Interrupted
    } else if any_skipped {
        Outcome::TasksSkipped
    } else if outcome.unscored() > 0 {
        Outcome::TrialsErrored
    } else {
        Outcome::Success
    })
}

/// The job directory under `jobs_dir`, refused when it already holds anything (nothing
/// already written is ever overwritten) or when `jobs_dir` cannot hold it.
fn check_job_dir(jobs_dir: &Path, job_name: &str) -> Result<PathBuf, CliError> {
    if jobs_dir.exists() && !jobs_dir.is_dir() {
        return Err(CliError::bad_input(format!(
            "--jobs-dir {}: not a directory",
            jobs_dir.display()
        )));
    }
    let job_dir = jobs_dir.join(job_name);
    let non_empty = std::fs::read_dir(&job_dir).is_ok_and(|mut d| d.next().is_some());
    if non_empty || job_dir.is_file() {
        return Err(CliError::bad_input(format!(
            "job directory {} already exists; choose another --job-name",
            job_dir.display()
        )));
    }
    std::fs::create_dir_all(&job_dir).map_err(|e| {
        CliError::bad_input(format!(
            "--jobs-dir {}: cannot create {}: {e}",
            jobs_dir.display(),
            job_dir.display()
        ))
    })?;
    Ok(job_dir)
}

fn report_outcome(outcome: &JobOutcome, job_dir: &Path) {
    if outcome.swept > 0 {
        note!(
            "removed {} leftover container(s) of this job",
            outcome.swept
        );
    }
    print_summary(&outcome.results, job_dir);
    if let Some(overhead) = outcome.mean_overhead {
        say!(
            "runner overhead: {:.2}s per trial (trial wall time minus time inside container commands)",
            overhead.as_secs_f64()
        );
    }
}

/// argv with the values of `--agent-env`/`--ae` replaced, as Harbor's lock does.
fn redacted_invocation() -> Vec<String> {
    let mut out = Vec::new();
    let mut redact_next = false;
    for arg in std::env::args() {
        if redact_next {
            out.push(redact_pair(&arg));
            redact_next = false;
        } else if arg == "--agent-env" || arg == "--ae" {
            out.push(arg);
            redact_next = true;
        } else if let Some(pair) = arg
            .strip_prefix("--agent-env=")
            .or_else(|| arg.strip_prefix("--ae="))
        {
            out.push(format!("--agent-env={}", redact_pair(pair)));
        } else {
            out.push(arg);
        }
    }
    out
}

fn redact_pair(pair: &str) -> String {
    match pair.split_once('=') {
        Some((name, _)) => format!("{name}=<redacted>"),
        None => "<redacted>".into(),
    }
}

/// First Ctrl-C, SIGTERM or SIGHUP (a closed terminal): cancel, let trials tear down.
/// Second: remove this job's containers and exit at once.
fn spawn_signal_handler(client: DockerClient, job_id: String, cancel: CancellationToken) {
    tokio::spawn(async move {
        wait_for_signal().await;
        note!(
            "\ninterrupted: removing containers and writing records; press Ctrl-C again to exit at once"
        );
        cancel.cancel();
        wait_for_signal().await;
        let _ = remove_job_containers(&client, &job_id).await;
        std::process::exit(i32::from(ExitCode::Interrupted.code()));
    });
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hangup = signal(SignalKind::hangup()).ok();
    let next = |s: &mut Option<tokio::signal::unix::Signal>| {
        let s = s.take();
        async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = next(&mut term) => {}
        _ = next(&mut hangup) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_single_directory_names() {
        assert!(parse_job_name("ci-oracle").is_ok());
        for bad in ["a/b", "..", ".", "", "../x"] {
            assert!(parse_job_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_jobs_dir_that_is_a_file_or_a_used_job_dir_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = check_job_dir(&file, "j").unwrap_err();
        assert!(err.message.starts_with("--jobs-dir"), "{err}");
        let used = dir.path().join("used");
        std::fs::create_dir_all(used.join("trial")).unwrap();
        assert!(check_job_dir(dir.path(), "used").is_err());
        assert!(check_job_dir(dir.path(), "fresh").unwrap().is_dir());
    }
}
