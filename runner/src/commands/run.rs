//! `runner run`: k trials of every task of a dataset with one agent.

use std::path::PathBuf;
use std::sync::Arc;

use adapter::{Agent, NopAgent, OracleAgent};
use tasks::Dataset;
use tasks::records::AgentConfig;
use tokio_util::sync::CancellationToken;

use crate::docker::{DockerClient, reap_dead_owners, remove_job_containers};
use crate::exit_codes;
use crate::job::{JobSettings, plan_job, run_job};
use crate::trial::Multipliers;

/// Arguments of `runner run`.
#[derive(Debug, clap::Args)]
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
        default_value_t = 1
    )]
    pub k: u32,
    /// Trials run at once.
    #[arg(short = 'n', long, default_value_t = 4)]
    pub n_concurrent: u32,
    /// Where job directories are written.
    #[arg(short = 'o', long, default_value = "jobs")]
    pub jobs_dir: PathBuf,
    /// The job directory's name (default: the local time, as Harbor names jobs).
    #[arg(long)]
    pub job_name: Option<String>,
    /// Rebuild task images even when an image of the same environment exists.
    #[arg(long)]
    pub force_build: bool,
    /// Multiplies every phase timeout (not allowed on leaderboards).
    #[arg(long, default_value_t = 1.0)]
    pub timeout_multiplier: f64,
    /// Multiplies the agent timeout (not allowed on leaderboards).
    #[arg(long)]
    pub agent_timeout_multiplier: Option<f64>,
    /// Multiplies the verifier timeout (not allowed on leaderboards).
    #[arg(long)]
    pub verifier_timeout_multiplier: Option<f64>,
    /// Multiplies the agent setup timeout (not allowed on leaderboards).
    #[arg(long)]
    pub agent_setup_timeout_multiplier: Option<f64>,
    /// Multiplies the environment build timeout (not allowed on leaderboards).
    #[arg(long)]
    pub environment_build_timeout_multiplier: Option<f64>,
    /// Env var for the agent's container, NAME=VALUE (repeatable).
    #[arg(long = "agent-env", visible_alias = "ae", value_name = "NAME=VALUE")]
    pub agent_env: Vec<String>,
    /// Let credentials reach containers. Recorded in config.json and lock.json; the job is then
    /// not publishable.
    #[arg(long)]
    pub allow_container_secrets: bool,
    /// Refuse to upload an agent source tree with uncommitted changes.
    #[arg(long)]
    pub require_clean_source: bool,
}

/// Runs `runner run`.
pub fn run(args: RunArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit_codes::BAD_INPUT;
        }
    };
    runtime.block_on(run_async(args))
}

async fn run_async(args: RunArgs) -> u8 {
    if let Err(message) = check_multipliers(&args) {
        eprintln!("error: {message}");
        return exit_codes::BAD_INPUT;
    }
    let dataset = match Dataset::load(&args.path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return exit_codes::BAD_INPUT;
        }
    };
    for skipped in &dataset.skipped {
        eprintln!("skipping task: {skipped}");
    }
    for warning in dataset.tasks.iter().flat_map(|t| &t.warnings) {
        eprintln!("warning: {warning}");
    }
    match (&args.agent, &args.agent_config) {
        (Some(name), None) => match name.as_str() {
            "oracle" => execute(args.clone_settings(), dataset, Arc::new(OracleAgent), None).await,
            "nop" => execute(args.clone_settings(), dataset, Arc::new(NopAgent), None).await,
            other => {
                eprintln!(
                    "error: --agent {other:?} is not a built-in agent (oracle, nop); use --agent-config for an installed agent"
                );
                exit_codes::BAD_INPUT
            }
        },
        (None, Some(path)) => crate::commands::installed::run_installed(&args, path, dataset).await,
        _ => {
            eprintln!("error: give either --agent or --agent-config");
            exit_codes::BAD_INPUT
        }
    }
}

/// The parts of the arguments a job needs, independent of the agent.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// See [`RunArgs`].
    pub k: u32,
    /// See [`RunArgs`].
    pub n_concurrent: u32,
    /// See [`RunArgs`].
    pub jobs_dir: PathBuf,
    /// See [`RunArgs`].
    pub job_name: Option<String>,
    /// See [`RunArgs`].
    pub force_build: bool,
    /// See [`RunArgs`].
    pub multipliers: Multipliers,
    /// See [`RunArgs`].
    pub allow_container_secrets: bool,
}

impl RunArgs {
    /// The agent-independent settings.
    pub fn clone_settings(&self) -> RunSettings {
        RunSettings {
            k: self.k,
            n_concurrent: self.n_concurrent,
            jobs_dir: self.jobs_dir.clone(),
            job_name: self.job_name.clone(),
            force_build: self.force_build,
            multipliers: Multipliers {
                global: self.timeout_multiplier,
                agent: self.agent_timeout_multiplier,
                verifier: self.verifier_timeout_multiplier,
                agent_setup: self.agent_setup_timeout_multiplier,
                environment_build: self.environment_build_timeout_multiplier,
            },
            allow_container_secrets: self.allow_container_secrets,
        }
    }
}

fn check_multipliers(args: &RunArgs) -> Result<(), String> {
    let all = [
        ("--timeout-multiplier", Some(args.timeout_multiplier)),
        ("--agent-timeout-multiplier", args.agent_timeout_multiplier),
        (
            "--verifier-timeout-multiplier",
            args.verifier_timeout_multiplier,
        ),
        (
            "--agent-setup-timeout-multiplier",
            args.agent_setup_timeout_multiplier,
        ),
        (
            "--environment-build-timeout-multiplier",
            args.environment_build_timeout_multiplier,
        ),
    ];
    for (flag, value) in all {
        if let Some(v) = value
            && !(v.is_finite() && v > 0.0)
        {
            return Err(format!("{flag} {v} must be a positive number"));
        }
    }
    if args.k == 0 {
        return Err("--k must be at least 1".into());
    }
    Ok(())
}

/// Runs a job with `agent` and returns the exit code.
pub async fn execute<A: Agent + 'static>(
    settings: RunSettings,
    dataset: Dataset,
    agent: Arc<A>,
    recorded: Option<(AgentConfig, Option<String>)>,
) -> u8 {
    if dataset.tasks.is_empty() {
        eprintln!("error: {} has no runnable task", dataset.dir.display());
        return exit_codes::BAD_INPUT;
    }
    let job_name = settings.job_name.clone().unwrap_or_else(|| {
        chrono::Local::now()
            .format("%Y-%m-%d__%H-%M-%S")
            .to_string()
    });
    let job_dir = settings.jobs_dir.join(&job_name);
    if job_dir.exists()
        && std::fs::read_dir(&job_dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        eprintln!(
            "error: job directory {} already exists; choose another --job-name",
            job_dir.display()
        );
        return exit_codes::BAD_INPUT;
    }
    let (agent_config, instruction_suffix) = recorded.unwrap_or_else(|| {
        (
            AgentConfig {
                name: Some(agent.name().to_owned()),
                model_name: agent.model_name(),
                ..AgentConfig::default()
            },
            None,
        )
    });
    let job_settings = JobSettings {
        job_name,
        jobs_dir: settings.jobs_dir.display().to_string(),
        k: settings.k,
        n_concurrent: settings.n_concurrent,
        multipliers: settings.multipliers,
        force_build: settings.force_build,
        agent: agent_config,
        allow_container_secrets: settings.allow_container_secrets,
        instruction_suffix,
        invocation: redacted_invocation(),
    };
    let plan = plan_job(&dataset, &job_settings);
    for skipped in &plan.skipped {
        eprintln!("skipping task: {skipped}");
    }
    let skipped_plans = plan.skipped.clone();
    if plan.trials.is_empty() {
        eprintln!("error: no task of {} can run", dataset.dir.display());
        return exit_codes::BAD_INPUT;
    }
    let client = match DockerClient::connect().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return exit_codes::BAD_INPUT;
        }
    };
    match reap_dead_owners(&client).await {
        Ok(0) => {}
        Ok(n) => {
            eprintln!("removed {n} container(s) left behind by runner processes that are gone")
        }
        Err(e) => eprintln!("warning: could not reap leftover containers: {e}"),
    }
    let cancel = CancellationToken::new();
    spawn_signal_handler(client.clone(), plan.job_id.clone(), cancel.clone());
    eprintln!(
        "job {} : {} trial(s), {} at once -> {}",
        plan.job_id,
        plan.trials.len(),
        settings.n_concurrent,
        job_dir.display()
    );
    let outcome = run_job(client, agent, plan, job_dir, &job_settings, cancel).await;
    if let Ok(outcome) = &outcome
        && !outcome.timings.is_empty()
    {
        let n = outcome.timings.len() as f64;
        let overhead: f64 = outcome
            .timings
            .iter()
            .map(|(_, wall, inside)| (wall - inside).max(0.0))
            .sum();
        println!(
            "runner overhead: {:.2}s per trial (trial wall time minus time inside container commands)",
            overhead / n
        );
    }
    match outcome {
        Ok(outcome) if outcome.interrupted => exit_codes::INTERRUPTED,
        // Malformed tasks were reported up front; the user must fix them before a full run.
        Ok(_) if !dataset.skipped.is_empty() || !skipped_plans.is_empty() => exit_codes::BAD_INPUT,
        Ok(outcome) if outcome.unscored > 0 => exit_codes::TRIALS_ERRORED,
        Ok(_) => exit_codes::OK,
        Err(e) => {
            eprintln!("error: writing the job directory failed: {e}");
            exit_codes::TRIALS_ERRORED
        }
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

/// First Ctrl-C/SIGTERM: cancel, let trials tear down. Second: remove this job's containers
/// and exit at once.
fn spawn_signal_handler(client: DockerClient, job_id: String, cancel: CancellationToken) {
    tokio::spawn(async move {
        wait_for_signal().await;
        eprintln!(
            "\ninterrupted: removing containers and writing records; press Ctrl-C again to exit at once"
        );
        cancel.cancel();
        wait_for_signal().await;
        let _ = remove_job_containers(&client, &job_id).await;
        std::process::exit(i32::from(exit_codes::INTERRUPTED));
    });
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}
