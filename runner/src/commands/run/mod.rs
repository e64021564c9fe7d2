//! `runner run`: k trials of every task of a dataset with one agent, or (`--resume`) the rest
//! of a job that stopped.

pub mod choices;
mod config_file;
mod dir_lock;
mod dry_run;
mod engine_summary;
mod engines;
mod finish;
pub mod invocation;
mod llm;
mod registry_records;
pub mod resume;
mod selection;
mod signals;
mod task_env;

use std::path::{Path, PathBuf};
use std::time::Instant;

use adapter::{Agent, AnyAgent};
use engine::job::resume::{RerunSelector, parse_selectors, resume};
use engine::job::{
    AgentFingerprint, JobOutcome, JobPlan, JobSettings, RetryPolicy, plan_job, run_job,
};
use engine::trial::{JobBridge, watchdog};
use tasks::{Dataset, Multipliers};
use tokio_util::sync::CancellationToken;

use crate::exit::{CliError, CommandOutcome, Family, Interruption};
use crate::note;
use crate::report::Reporter;
use engines::{Engines, JobBackend};

/// Arguments of `runner run`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Run))]
#[command(mut_arg("retry_failed", |arg| arg.requires("resume")))]
pub struct RunArgs {
    /// A task directory or a dataset directory (a folder of task directories).
    #[arg(short = 'p', long, env = "RUNNER_PATH", required_unless_present_any = ["config", "resume", "dataset"],
          default_value = "", hide_default_value = true, value_parser = any_path)]
    pub path: PathBuf,
    /// -d/--dataset NAME[@VERSION] with --registry-url/--registry-path: a dataset by name.
    #[command(flatten)]
    pub source: super::dataset_source::DatasetSourceArgs,
    /// A built-in agent (`oracle` runs the task's solution, `nop` does nothing), or the path
    /// of an agent config file (as --agent-config).
    #[arg(
        short = 'a',
        long,
        env = "RUNNER_AGENT",
        conflicts_with = "agent_config",
        required_unless_present_any = ["agent_config", "config", "resume"]
    )]
    pub agent: Option<String>,
    /// An agent config file (TOML): an installed agent (`[server]`) or a command-style one (`[run]`).
    #[arg(long, env = "RUNNER_AGENT_CONFIG")]
    pub agent_config: Option<PathBuf>,
    /// Trials per task.
    #[arg(
        short,
        long,
        visible_alias = "n-attempts",
        env = "RUNNER_K",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub k: u32,
    /// Trials run at once.
    #[arg(short = 'n', long, env = "RUNNER_N_CONCURRENT", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub n_concurrent: u32,
    /// A Docker engine of the pool the trials run on (repeatable; `unix:///path`,
    /// `tcp://host:port` (TLS with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, as the Docker CLI)
    /// or `ssh://[user@]host[:port]` (ssh running `docker system dial-stdio`; RUNNER_SSH_COMMAND
    /// replaces `ssh`), optionally `#n=N` to cap its trials at once). Default: the one engine
    /// of DOCKER_HOST. Also RUNNER_DOCKER_HOSTS, comma-separated, when neither this nor
    /// --docker-context is given.
    #[arg(long = "docker-host", value_name = "URL")]
    pub docker_hosts: Vec<String>,
    /// A Docker CLI context's engine (repeatable, mixable with --docker-host; its TLS
    /// certificates from the context store under DOCKER_CONFIG or ~/.docker; `NAME#n=N` caps
    /// its trials at once).
    #[arg(long = "docker-context", value_name = "NAME")]
    pub docker_context: Vec<String>,
    /// Where job directories are written.
    #[arg(short = 'o', long, env = "RUNNER_JOBS_DIR", default_value = "jobs")]
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
    /// Agent kwarg KEY=VALUE for a command-style agent's `{kwargs.KEY}` (repeatable); a JSON
    /// value (3, true) is kept as JSON. Recorded in config.json as the agent's kwargs.
    #[arg(long = "agent-kwarg", visible_alias = "ak", value_name = "KEY=VALUE")]
    pub agent_kwargs: Vec<String>,
    /// Tell the agent its deadline: the run's agent timeout (the task's, with the multipliers)
    /// appended to the instruction as Harbor appends an --extra-instruction, after a blank
    /// line. Command-style agents (the catalogue's) only; off by default. Recorded in each
    /// trial's agent/instruction.txt and agent_result.metadata.deadline_told. A turn limit is
    /// the agent's own kwarg (--ak max_turns=N).
    #[arg(long)]
    pub tell_agent_deadline: bool,
    /// Let credentials reach containers. Recorded in config.json and lock.json; the job is then
    /// not publishable.
    #[arg(long)]
    pub allow_container_secrets: bool,
    /// Run the tests with the programs and startup hooks the agent left (its python3, bash,
    /// ld.so.preload, sitecustomize, /conftest.py), as Harbor does, instead of the task
    /// image's own. Only for tasks whose tests must use what the agent built; recorded in
    /// config.json (verifier.agent_toolchain) and each result, and validate-submission fails
    /// a rewarded trial verified this way after the agent changed them.
    #[arg(long)]
    pub agent_toolchain: bool,
    /// A host variable that `${NAME}` templates in task env tables may read (repeatable).
    /// Templates naming any other variable take their default or refuse the task; a value
    /// that looks like a credential is refused unless --allow-container-secrets.
    #[arg(long = "task-env-from", value_name = "NAME")]
    pub task_env_from: Vec<String>,
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
    /// Most entries (files, directories, links) one trial brings back to the host, under the
    /// same budget as --max-download-mb: empty files cost no bytes, so this bounds them; past
    /// it the rest of that download is not read and the trial records it.
    #[arg(long, default_value_t = engine::limits::DEFAULT_DOWNLOAD_CAP_ENTRIES,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub max_download_files: u64,
    /// Most MB of trial.log per trial; past it command output is dropped after a marker line.
    #[arg(long, default_value_t = engine::limits::DEFAULT_TRIAL_LOG_CAP_BYTES >> 20,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_trial_log_mb: u64,
    /// Retries per trial of a failed attempt (kept under <trial>/attempts/<n>/). Only
    /// infrastructure errors are retried: a retry never re-rolls an agent's result.
    #[arg(short = 'r', long, value_name = "N", env = "RUNNER_MAX_RETRIES",
          default_value_t = RetryPolicy::DEFAULT_MAX_RETRIES)]
    pub max_retries: u32,
    /// Of the infrastructure errors, retry only these exception types or families
    /// (TimeoutError, EnvironmentError, AgentError, VerifierError); repeatable.
    #[arg(long = "retry-include", value_name = "TYPE")]
    pub retry_include: Vec<String>,
    /// Never retry these exception types or families; repeatable (default: Harbor's list,
    /// AgentTimeoutError, VerifierTimeoutError and the reward-file errors, plus
    /// VerifierEnvError).
    #[arg(long = "retry-exclude", value_name = "TYPE")]
    pub retry_exclude: Option<Vec<String>>,
    /// Continue the job in JOB_DIR: complete trials are kept untouched, missing and
    /// interrupted ones run (a raised --k adds trials). Alone (no --path/--agent), it replays
    /// the flags the job was started with; with flags, they are refused, naming the
    /// difference, when the agent, tasks, multipliers or limits differ from the job's.
    // Not a clap conflict with --jobs-dir: RUNNER_JOBS_DIR would then forbid every resume;
    // a --jobs-dir on the command line is refused by `cli::try_parse_from`.
    #[arg(long, value_name = "JOB_DIR", conflicts_with = "job_name")]
    pub resume: Option<PathBuf>,
    /// --retry-failed (with --resume) and --min-coverage, as `runner jobs resume` takes them.
    #[command(flatten)]
    pub replay: resume::ReplayArgs,
    /// Run only the I-th of N disjoint parts of the plan (1 ≤ I ≤ N): all k trials of a task
    /// in one part, split the same way on every machine and balanced by the tasks' agent
    /// timeouts. Each part is a job dir of its own; `runner merge` joins them.
    #[arg(long, value_name = "I/N", env = "RUNNER_SHARD", value_parser = parse_shard)]
    pub shard: Option<engine::job::Shard>,
    /// Sign the job's record manifest (record_manifest.jsonl: every trial's files, hashed as
    /// the trial ended) with this ed25519 private key (PEM, PKCS#8, as `openssl genpkey
    /// -algorithm ed25519` writes it), so `validate-submission --trusted-key` can tell the run
    /// was made on a machine holding it.
    #[arg(long, value_name = "FILE", env = "RUNNER_SIGNING_KEY")]
    pub signing_key: Option<PathBuf>,
    /// Models and the LLM bridge (h1-bridge).
    #[command(flatten)]
    pub llm: llm::LlmArgs,
    /// Task selection (-i/-x/-l), job config file (-c), progress display and output format.
    #[command(flatten)]
    pub choices: choices::ChoiceArgs,
    /// --dry-run, --print-config and --history: a job shown instead of run.
    #[command(flatten)]
    pub preview: dry_run::PreviewArgs,
    /// The invocation to record instead of this process's argv (`runner jobs resume` replays
    /// the recorded one).
    #[arg(skip)]
    pub recorded_invocation: Option<(Vec<String>, Option<String>)>,
    /// Harbor 0.26's `override_error_policy`, from `-c` only (Harbor has no flag for it);
    /// checked when the file is read.
    #[arg(skip)]
    pub override_error_policy: tasks::error_policy::ErrorPolicyOverrides,
    /// `-d`'s dataset once resolved (its directory is then `path`).
    #[arg(skip)]
    pub resolved: Option<registry::ResolvedDataset>,
}

/// A path, the empty one included (`--path`'s default when `-c` gives it instead).
pub(crate) fn any_path(text: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(text))
}

/// A fraction from 0 to 1.
fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "{text:?} is not a fraction from 0 to 1 (e.g. 0.95)"
        )),
    }
}

/// `--shard I/N`.
fn parse_shard(text: &str) -> Result<engine::job::Shard, String> {
    text.parse()
        .map_err(|e: engine::job::ShardError| e.to_string())
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
pub fn run(mut args: RunArgs) -> Result<CommandOutcome, CliError> {
    if resume::resumes_alone(&args) {
        args = resume::replayed_for_resume(args)?;
    }
    choices::apply_config_file(&mut args)?;
    // Before the runtime starts and before any trial: a dataset by name becomes a verified
    // local directory, and everything after reads it as --path.
    if let Some(resolved) = args.source.resolve()? {
        args.path = resolved.dir.clone();
        args.resolved = Some(resolved);
    }
    super::block_on(run_async(args))
}

async fn run_async(args: RunArgs) -> Result<CommandOutcome, CliError> {
    let started = Instant::now();
    let mut dataset = load_dataset(&args)?;
    let (retry, selectors) = retry_policy(&args)?;
    let agent = choose_agent(&args)?;
    let signing_key = super::merge::read_signing_key(args.signing_key.as_deref())?;
    if dataset.tasks.is_empty() {
        return Err(CliError::bad_input(format!(
            "{} has no runnable task",
            dataset.dir.display()
        )));
    }
    let bridge = job_bridge(&args, &agent)?;
    // Engines the pool cannot use are refused before the job dir exists too.
    let engine_urls = engines::engine_urls(&args.docker_hosts, &args.docker_context)?;
    let (jobs_dir, job_name, job_dir) = job_dir(&args)?;
    let settings = job_settings(&args, &agent, retry, bridge, job_name, &jobs_dir);
    let host = task_env::host_vars(&args.task_env_from, args.allow_container_secrets, &job_dir)?;
    dataset.pass_host_vars(&host);
    let mut plan = plan(&args, &dataset, &settings)?;
    if preview(&args, &plan, &settings).await? {
        return Ok(CommandOutcome::Success);
    }
    // Once per job, on the host, before any trial: an agent's prepared files (a wheel from
    // the package index) are fetched into runner's cache, or the job stops here.
    agent
        .prepare_host_files(&|line| note!("{line}"))
        .map_err(|e| CliError::bad_input_because(format!("agent {}", agent.name()), e))?;
    // Before the job dir is touched: an engine that does not answer, or a host that cannot
    // isolate any trial's tests, says so once, with the fix, instead of failing every trial.
    let engines = Engines::connect(engine_urls).await?;
    let _lock = dir_lock::lock(&job_dir)?;
    task_env::keep_key(&host, &job_dir)?;
    if args.resume.is_some() {
        continue_job(&args, &job_dir, &mut plan, &selectors)?;
    }
    engines.reap().await;
    let skipped = plan.skipped.clone();
    let pooled = matches!(engines, Engines::Pool(_));
    let outcome = execute(&args, engines, agent, plan, &job_dir, &settings).await?;
    if let Some(key) = &signing_key {
        engine::job::record_manifest::sign_job(&job_dir, key).map_err(|e| {
            CliError::runner(format!(
                "{}: cannot sign the record manifest: {e}",
                job_dir.display()
            ))
        })?;
    }
    finish::report_outcome(
        &outcome,
        &job_dir,
        &skipped,
        started.elapsed(),
        args.choices.format,
        pooled,
    )?;
    Ok(gate(
        &outcome,
        !skipped.is_empty(),
        args.replay.min_coverage,
        signals::received(),
    ))
}

/// The dataset of `--path`, its origins when `-d` named it, and only the selected tasks.
fn load_dataset(args: &RunArgs) -> Result<Dataset, CliError> {
    let mut dataset = Dataset::load(&args.path).map_err(CliError::bad_input)?;
    if let Some(resolved) = &args.resolved {
        registry_records::set_origins(&mut dataset, resolved);
    }
    choices::select_tasks(&mut dataset, &args.choices.selection)?;
    for warning in dataset.tasks.iter().flat_map(|t| &t.warnings) {
        note!("warning: {warning}");
    }
    Ok(dataset)
}

/// Which failed attempts are retried (`-r`, `--retry-include/--retry-exclude`, the config
/// file's error policy) and, with `--resume`, which failed trials run again.
fn retry_policy(args: &RunArgs) -> Result<(RetryPolicy, Vec<RerunSelector>), CliError> {
    let mut retry = RetryPolicy::new(
        args.max_retries,
        &args.retry_include,
        args.retry_exclude.as_deref(),
    )
    .map_err(|e| CliError::bad_input_because("--retry-include/--retry-exclude", e))?;
    retry.apply_overrides(&args.override_error_policy, args.retry_exclude.is_some());
    let selectors = parse_selectors(&args.replay.retry_failed)
        .map_err(|e| CliError::bad_input_because("--retry-failed", e))?;
    Ok((retry, selectors))
}

/// The agent of `-a`/`--agent-config`, with its env, kwargs and model.
fn choose_agent(args: &RunArgs) -> Result<AnyAgent, CliError> {
    super::agent::choose(&super::agent::AgentChoice {
        name: args.agent.as_deref(),
        config: args.agent_config.as_deref(),
        agent_env: &args.agent_env,
        agent_kwargs: &args.agent_kwargs,
        tell_deadline: args.tell_agent_deadline,
        model: args.llm.model_name().as_deref(),
        allow_container_secrets: args.allow_container_secrets,
        require_clean_source: args.require_clean_source,
    })
}

/// The job's LLM bridge, for an agent that calls models.
fn job_bridge(args: &RunArgs, agent: &AnyAgent) -> Result<Option<JobBridge>, CliError> {
    // Before the job dir exists: a model without a key is refused leaving nothing behind.
    // Agents from a config file (installed or command-style, by -a or --agent-config) call
    // models; the built-in ones do not.
    let from_config = matches!(agent, AnyAgent::Installed(_) | AnyAgent::Command(_));
    let config_file = args
        .agent_config
        .as_deref()
        .or(args.agent.as_deref().map(Path::new));
    args.llm.job_bridge(
        agent,
        config_file,
        from_config,
        args.allow_container_secrets,
    )
}

/// `(jobs_dir, job_name, job_dir)`: the resumed job's, or a new one's (made unless only
/// previewed).
fn job_dir(args: &RunArgs) -> Result<(PathBuf, String, PathBuf), CliError> {
    match &args.resume {
        Some(dir) => resume::existing_job_dir(dir),
        None => {
            let job_name = args.job_name.clone().unwrap_or_else(|| {
                chrono::Local::now()
                    .format("%Y-%m-%d__%H-%M-%S")
                    .to_string()
            });
            let preview = args.preview.dry_run || args.preview.print_config;
            let job_dir = check_job_dir(&args.jobs_dir, &job_name, !preview)?;
            Ok((args.jobs_dir.clone(), job_name, job_dir))
        }
    }
}

/// The job's settings, as config.json and lock.json record them.
fn job_settings(
    args: &RunArgs,
    agent: &AnyAgent,
    retry: RetryPolicy,
    bridge: Option<JobBridge>,
    job_name: String,
    jobs_dir: &Path,
) -> JobSettings {
    let (invocation, working_dir) = args.recorded_invocation.clone().unwrap_or_else(|| {
        (
            invocation::redacted(std::env::args()),
            std::env::current_dir()
                .ok()
                .map(|d| d.display().to_string()),
        )
    });
    let mut agent_config = agent.job_config();
    agent_config.model_name = args.llm.model_name().or(agent_config.model_name);
    if let Some(bridge) = &bridge {
        agent_config.models = bridge.models.clone();
    }
    JobSettings {
        job_name,
        jobs_dir: jobs_dir.display().to_string(),
        k: args.k,
        n_concurrent: args.n_concurrent,
        multipliers: args.multipliers,
        force_build: args.force_build,
        agent: agent_config,
        agent_fingerprint: AgentFingerprint::of(agent),
        retry,
        override_error_policy: args.override_error_policy.clone(),
        watchdog_grace: watchdog::DEFAULT_GRACE,
        allow_container_secrets: args.allow_container_secrets,
        instruction_suffix: agent.instruction_suffix().map(str::to_owned),
        invocation,
        working_dir,
        runner_commit: option_env!("RUNNER_GIT_COMMIT")
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
        limits: engine::LimitSettings {
            pids_limit: args.pids_limit,
            download_cap_bytes: args.max_download_mb << 20,
            download_cap_entries: args.max_download_files,
            trial_log_cap_bytes: args.max_trial_log_mb << 20,
            ..engine::LimitSettings::default()
        },
        bridge,
        agent_toolchain: args.agent_toolchain,
    }
}

/// The job's plan with what config.json records of the choices, cut to `--shard`; refused
/// when no task can run.
fn plan(args: &RunArgs, dataset: &Dataset, settings: &JobSettings) -> Result<JobPlan, CliError> {
    let mut plan = plan_job(dataset, settings);
    plan.config.task_env_from = args.task_env_from.clone();
    choices::record_selection(&mut plan.config, &args.choices.selection);
    choices::record_agent_config(&mut plan.config, args.agent_config.as_deref());
    if let Some(resolved) = &args.resolved {
        registry_records::record_dataset(&mut plan.config, resolved);
    }
    for skipped in &plan.skipped {
        note!("skipping task: {skipped}");
    }
    if plan.trials.is_empty() {
        return Err(CliError::bad_input(format!(
            "no task of {} can run",
            dataset.dir.display()
        )));
    }
    if let Some(shard) = args.shard {
        let tasks = plan.tasks().len();
        engine::job::select_shard(&mut plan, shard);
        note!(
            "shard {shard}: {} of the plan's {tasks} task(s), {} trial(s)",
            plan.tasks().len(),
            plan.trials.len()
        );
    }
    Ok(plan)
}

/// `--print-config` or `--dry-run`: shows the job instead of running it. True when it did.
async fn preview(args: &RunArgs, plan: &JobPlan, settings: &JobSettings) -> Result<bool, CliError> {
    if args.preview.print_config {
        dry_run::print_config(plan)?;
        return Ok(true);
    }
    if args.preview.dry_run {
        let json = args.choices.format == super::view::TextFormat::Json;
        let shard = args.shard.map(|s| s.to_string());
        dry_run::print_plan(plan, settings, &args.preview, shard, json).await?;
        return Ok(true);
    }
    Ok(false)
}

/// `--resume`: the plan cut to the trials the job still needs, once the dataset is checked
/// to be the one the job pinned.
fn continue_job(
    args: &RunArgs,
    job_dir: &Path,
    plan: &mut JobPlan,
    selectors: &[RerunSelector],
) -> Result<(), CliError> {
    if let Some(resolved) = &args.resolved {
        registry_records::check_pins(job_dir, resolved)?;
    }
    let report = resume(job_dir, plan, selectors).map_err(resume::resume_error)?;
    resume::note_resume(&report, job_dir);
    Ok(())
}

/// Runs the planned trials on the engines, showing progress, until they end or a signal
/// cancels the job.
async fn execute(
    args: &RunArgs,
    engines: Engines,
    agent: AnyAgent,
    plan: JobPlan,
    job_dir: &Path,
    settings: &JobSettings,
) -> Result<JobOutcome, CliError> {
    let cancel = CancellationToken::new();
    note!(
        "job {} : {} trial(s) to run of {} planned, {} at once -> {}",
        plan.job_id,
        plan.trials.len(),
        plan.planned,
        settings.n_concurrent,
        job_dir.display()
    );
    let mut reporter = Reporter::new(
        plan.planned as u64,
        &plan.done,
        settings.n_concurrent,
        args.choices.progress,
    );
    signals::spawn_signal_handler(
        engines.clients(),
        plan.job_id.clone(),
        cancel.clone(),
        reporter.notice(),
    );
    let dir = job_dir.to_path_buf();
    let outcome = match engines.backend(args.images.policy()).await? {
        JobBackend::One(backend) => {
            run_job(backend, agent, plan, dir, settings, cancel, |e| {
                reporter.event(e)
            })
            .await
        }
        JobBackend::Pool(pool) => {
            run_job(pool, agent, plan, dir, settings, cancel, |e| {
                reporter.event(e)
            })
            .await
        }
    };
    reporter.finish();
    outcome.map_err(CliError::runner)
}

/// The exit outcome of a finished job: interrupted, tasks skipped, then the coverage gate
/// (every planned trial has a result, scored or an agent error, or at least `min_coverage`
/// of them are scored).
fn gate(
    outcome: &JobOutcome,
    any_skipped: bool,
    min_coverage: Option<f64>,
    by: Interruption,
) -> CommandOutcome {
    let passes = match min_coverage {
        Some(min) => outcome.coverage.fraction + 1e-9 >= min,
        None => outcome.missing() == 0,
    };
    if outcome.interrupted {
        CommandOutcome::Interrupted(by)
    } else if any_skipped {
        CommandOutcome::TasksSkipped
    } else if !passes {
        CommandOutcome::TrialsErrored
    } else {
        CommandOutcome::Success
    }
}

/// The job directory under `jobs_dir`, refused when it already holds anything (nothing
/// already written is ever overwritten) or when `jobs_dir` cannot hold it.
/// `<jobs_dir>/<job_name>`, refused when it holds a job; made when `create` (not for a
/// preview, which writes nothing).
fn check_job_dir(jobs_dir: &Path, job_name: &str, create: bool) -> Result<PathBuf, CliError> {
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
            "job directory {} already exists; continue it with --resume {} or choose another --job-name",
            job_dir.display(),
            job_dir.display()
        )));
    }
    if !create {
        return Ok(job_dir);
    }
    std::fs::create_dir_all(&job_dir).map_err(|e| {
        CliError::bad_input_because(
            format!(
                "--jobs-dir {}: cannot create {}",
                jobs_dir.display(),
                job_dir.display()
            ),
            e,
        )
    })?;
    Ok(job_dir)
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
        let err = check_job_dir(&file, "j", true).unwrap_err();
        assert!(err.to_string().starts_with("--jobs-dir"), "{err}");
        let used = dir.path().join("used");
        std::fs::create_dir_all(used.join("trial")).unwrap();
        assert!(check_job_dir(dir.path(), "used", true).is_err());
        assert!(check_job_dir(dir.path(), "fresh", true).unwrap().is_dir());
    }

    fn outcome(scored: u32, agent_error: u32, infra_error: u32, not_run: u32) -> JobOutcome {
        let planned = scored + agent_error + infra_error + not_run;
        JobOutcome {
            results: Vec::new(),
            planned: planned as usize,
            coverage: tasks::records::Coverage {
                planned,
                scored,
                agent_error,
                infra_error,
                not_run,
                retries: 0,
                fraction: f64::from(scored) / f64::from(planned),
            },
            interrupted: false,
            median_overhead: None,
            swept: 0,
            llm: None,
        }
    }

    #[test]
    fn the_gate_accepts_agent_errors_and_refuses_missing_data_unless_coverage_suffices() {
        assert_eq!(
            gate(&outcome(9, 1, 0, 0), false, None, Interruption::Interrupt),
            CommandOutcome::Success
        );
        assert_eq!(
            gate(&outcome(9, 0, 1, 0), false, None, Interruption::Interrupt),
            CommandOutcome::TrialsErrored
        );
        assert_eq!(
            gate(&outcome(9, 0, 0, 1), false, None, Interruption::Interrupt),
            CommandOutcome::TrialsErrored
        );
        assert_eq!(
            gate(
                &outcome(9, 0, 1, 0),
                false,
                Some(0.9),
                Interruption::Interrupt
            ),
            CommandOutcome::Success
        );
        assert_eq!(
            gate(
                &outcome(8, 1, 1, 0),
                false,
                Some(0.9),
                Interruption::Interrupt
            ),
            CommandOutcome::TrialsErrored
        );
        assert_eq!(
            gate(&outcome(10, 0, 0, 0), true, None, Interruption::Interrupt),
            CommandOutcome::TasksSkipped
        );
        let mut interrupted = outcome(5, 0, 0, 5);
        interrupted.interrupted = true;
        assert_eq!(
            gate(&interrupted, false, None, Interruption::Terminate),
            CommandOutcome::Interrupted(Interruption::Terminate)
        );
    }

    #[test]
    fn fractions_are_from_zero_to_one() {
        assert_eq!(parse_fraction("0.95"), Ok(0.95));
        assert!(parse_fraction("1.5").is_err());
        assert!(parse_fraction("-0.1").is_err());
        assert!(parse_fraction("x").is_err());
    }
}
