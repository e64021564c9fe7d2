//! The trial state machine.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use adapter::{Agent, AgentErrorKind, AgentRun};
use chrono::Utc;
use tasks::records::{PhaseTiming, TrialConfig, TrialResult};
use tasks::{Sandbox, Task};
use tokio::sync::{OnceCell, mpsc::UnboundedSender};
use tokio_util::sync::CancellationToken;

use super::healthcheck::run_healthcheck;
use super::log::TrialLog;
use super::record::{Failure, new_result, record_failure};
use super::timeouts::{Multipliers, PhaseTimeouts};
use crate::docker::{
    ContainerSpec, DockerClient, DockerSandbox, ImageInfo, Owner, TrialContainer, ensure_task_image,
};
use crate::events::{Event, Phase};

/// Images of a job, built at most once per task.
pub type ImageCache = HashMap<String, Arc<OnceCell<Result<ImageInfo, String>>>>;

/// What every trial of a job shares.
pub struct JobShared<A> {
    /// The engine.
    pub client: DockerClient,
    /// This process, for container labels.
    pub owner: Owner,
    /// The job id.
    pub job_id: String,
    /// The job directory.
    pub job_dir: PathBuf,
    /// The agent.
    pub agent: Arc<A>,
    /// Timeout multipliers.
    pub multipliers: Multipliers,
    /// Rebuild images even when the tag exists.
    pub force_build: bool,
    /// Images per task name.
    pub images: ImageCache,
    /// Event channel to the recorder and reporter.
    pub events: UnboundedSender<Event>,
    /// Cancelled on Ctrl-C.
    pub cancel: CancellationToken,
}

/// One planned trial.
#[derive(Debug, Clone)]
pub struct TrialPlan {
    /// The task.
    pub task: Arc<Task>,
    /// The trial's config (written as config.json).
    pub config: TrialConfig,
    /// The task's `[environment].env`, resolved.
    pub env: BTreeMap<String, String>,
}

/// A finished trial and how long the runner itself spent on it.
#[derive(Debug)]
pub struct TrialOutcome {
    /// The record written to result.json.
    pub result: TrialResult,
    /// Wall time of the trial, excluding the wait for the shared image.
    pub wall: Duration,
    /// Time spent inside container commands.
    pub in_container: Duration,
}

/// Runs one trial to the end and writes its records. Never panics on trial errors: they are
/// recorded in `exception_info`.
pub async fn run_trial<A: Agent + 'static>(
    shared: Arc<JobShared<A>>,
    plan: TrialPlan,
) -> TrialOutcome {
    let trial_name = plan.config.trial_name.clone();
    let trial_dir = shared.job_dir.join(&trial_name);
    let _ = std::fs::create_dir_all(trial_dir.join("agent"));
    let _ = std::fs::create_dir_all(trial_dir.join("verifier"));
    let _ = std::fs::create_dir_all(trial_dir.join("artifacts"));
    let log = TrialLog::open(&trial_dir.join("trial.log"));
    if let Err(e) = tasks::atomic::write_json_atomic(&trial_dir.join("config.json"), &plan.config) {
        log.line(&format!("cannot write config.json: {e}"));
    }
    let _ = shared.events.send(Event::TrialStarted {
        trial: trial_name.clone(),
    });
    let mut result = new_result(&shared, &plan, &trial_dir);
    let timeouts = PhaseTimeouts::resolve(&plan.task.config, &shared.multipliers);
    log.line(&format!(
        "trial {trial_name} of task {} ({})",
        plan.task.name, plan.task.digest
    ));
    log.line(&format!("timeouts: {timeouts:?}"));

    let exec_nanos = Arc::new(AtomicU64::new(0));
    let mut container: Option<TrialContainer> = None;
    let mut wait_for_image = Duration::ZERO;
    let started = Instant::now();
    let body = run_phases(
        &shared,
        &plan,
        &trial_dir,
        &log,
        &timeouts,
        &exec_nanos,
        &mut result,
        &mut container,
        &mut wait_for_image,
    );
    let failure = tokio::select! {
        failure = body => failure,
        _ = shared.cancel.cancelled() => Some(Failure::new("CancelledError", "the run was interrupted (Ctrl-C or SIGTERM)")),
    };
    if let Some(failure) = failure {
        log.line(&format!("{}: {}", failure.exception_type, failure.message));
        record_failure(&mut result, &trial_dir, failure);
    }
    let _ = shared.events.send(Event::Phase {
        trial: trial_name.clone(),
        phase: Phase::Teardown,
    });
    if let Some(container) = container.take() {
        if let Err(e) = container.remove(&shared.client).await {
            log.line(&format!(
                "removing container failed: {e}; the next run reaps it"
            ));
        } else {
            log.line("container removed");
        }
    }
    result.finished_at = Some(Utc::now());
    let wall = started.elapsed().saturating_sub(wait_for_image);
    let in_container = Duration::from_nanos(exec_nanos.load(Ordering::Relaxed));
    log.line(&format!(
        "overhead: wall {:.3}s, in-container {:.3}s, runner {:.3}s",
        wall.as_secs_f64(),
        in_container.as_secs_f64(),
        wall.saturating_sub(in_container).as_secs_f64()
    ));
    if let Err(e) = tasks::atomic::write_json_atomic(&trial_dir.join("result.json"), &result) {
        log.line(&format!("cannot write result.json: {e}"));
    }
    TrialOutcome {
        result,
        wall,
        in_container,
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_phases<A: Agent + 'static>(
    shared: &JobShared<A>,
    plan: &TrialPlan,
    trial_dir: &std::path::Path,
    log: &TrialLog,
    timeouts: &PhaseTimeouts,
    exec_nanos: &Arc<AtomicU64>,
    result: &mut TrialResult,
    container_slot: &mut Option<TrialContainer>,
    wait_for_image: &mut Duration,
) -> Option<Failure> {
    let task = &plan.task;
    let trial = plan.config.trial_name.clone();
    let phase = |p: Phase| {
        let _ = shared.events.send(Event::Phase {
            trial: trial.clone(),
            phase: p,
        });
    };

    // Environment: the shared image, then this trial's container and healthcheck.
    let mut env_timing = PhaseTiming::start();
    phase(Phase::Image);
    let image_wait = Instant::now();
    let image = match image_for(shared, task, timeouts.environment_build, log).await {
        Ok(image) => image,
        Err(failure) => {
            env_timing.finish();
            result.environment_setup = Some(env_timing);
            return Some(failure);
        }
    };
    *wait_for_image = image_wait.elapsed();
    phase(Phase::Environment);
    let env_config = &task.config.environment;
    let spec = ContainerSpec {
        name: format!(
            "runner-{}-{}",
            &shared.job_id[..8],
            crate::docker::sanitize(&trial)
        ),
        image: image.id.clone(),
        job_id: shared.job_id.clone(),
        trial_name: trial.clone(),
        task_name: task.name.clone(),
        cpus: env_config.cpus,
        memory_mb: env_config.effective_memory_mb(),
        network: env_config.effective_network() == tasks::NetworkMode::Public,
        workdir: env_config.workdir.clone(),
        env: plan.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    };
    let start = tokio::time::timeout(
        timeouts.environment_build,
        TrialContainer::start(&shared.client, &spec, &shared.owner),
    )
    .await;
    let container = match start {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return finish_env(
                result,
                env_timing,
                Failure::new("EnvironmentStartError", e.to_string()),
            );
        }
        Err(_) => {
            let secs = timeouts.environment_build.as_secs_f64();
            return finish_env(
                result,
                env_timing,
                Failure::new(
                    "EnvironmentStartTimeoutError",
                    format!("Environment start timed out after {secs} seconds"),
                ),
            );
        }
    };
    log.line(&format!(
        "container {} started from {} ({})",
        container.name, image.tag, image.id
    ));
    let sandbox = counting_sandbox(
        shared,
        &container,
        env_config.workdir.clone(),
        log,
        exec_nanos,
    );
    *container_slot = Some(container);
    if let Err(failure) = super::environment::prepare(&sandbox, task).await {
        return finish_env(result, env_timing, failure);
    }
    if let Some(check) = &env_config.healthcheck
        && let Err(failure) = run_healthcheck(&sandbox, check, log).await
    {
        return finish_env(result, env_timing, failure);
    }
    env_timing.finish();
    result.environment_setup = Some(env_timing);

    // Agent setup.
    phase(Phase::AgentSetup);
    let agent_user = task.config.agent.user.as_ref().map(|u| u.as_exec_user());
    let run = AgentRun {
        task,
        trial_dir: trial_dir.to_path_buf(),
        user: agent_user,
        setup_deadline: Instant::now() + timeouts.agent_setup,
        run_deadline: None,
        agent_timeout_sec: timeouts.agent.map(|d| d.as_secs_f64()),
    };
    let mut setup_timing = PhaseTiming::start();
    let setup =
        tokio::time::timeout(timeouts.agent_setup, shared.agent.setup(&sandbox, &run)).await;
    setup_timing.finish();
    result.agent_setup = Some(setup_timing);
    match setup {
        Ok(Ok(Some(version))) => result.agent_info.version = version,
        Ok(Ok(None)) => {}
        Ok(Err(e)) => return Some(Failure::new(e.kind.exception_type(), e.message)),
        Err(_) => {
            let secs = timeouts.agent_setup.as_secs_f64();
            return Some(Failure::new(
                "AgentSetupTimeoutError",
                format!("Agent setup timed out after {secs} seconds"),
            ));
        }
    }

    // Agent run: the agent enforces its own deadline (so it can cancel its work); the host
    // timeout is a backstop against an agent that does not.
    phase(Phase::Agent);
    let run = AgentRun {
        run_deadline: timeouts.agent.map(|d| Instant::now() + d),
        ..run
    };
    let mut agent_timing = PhaseTiming::start();
    let backstop = timeouts
        .agent
        .map_or(Duration::MAX, |d| d + Duration::from_secs(60));
    let outcome = tokio::time::timeout(
        backstop,
        shared.agent.run(&sandbox, &run, &task.instruction),
    )
    .await;
    agent_timing.finish();
    result.agent_execution = Some(agent_timing);
    let mut agent_failure = None;
    match outcome {
        Ok(Ok(report)) => result.agent_result = report.context,
        Ok(Err(e)) if e.kind.continues_to_verification() => {
            result.agent_result = e.context.map(|c| *c);
            agent_failure = Some(Failure::new(e.kind.exception_type(), e.message));
        }
        Ok(Err(e)) => return Some(Failure::new(e.kind.exception_type(), e.message)),
        Err(_) => {
            let secs = timeouts.agent.map(|d| d.as_secs_f64()).unwrap_or_default();
            agent_failure = Some(Failure::new(
                AgentErrorKind::Timeout.exception_type(),
                format!("Agent execution timed out after {secs} seconds"),
            ));
        }
    }
    if let Some(failure) = agent_failure {
        log.line(&format!(
            "{}: {} (verification still runs)",
            failure.exception_type, failure.message
        ));
        record_failure(result, trial_dir, failure);
    }
    if let Err(e) = sandbox
        .download_dir("/logs/agent", &trial_dir.join("agent"))
        .await
    {
        log.line(&format!("collecting /logs/agent failed: {e}"));
    }

    // Verification.
    phase(Phase::Verifier);
    let mut verifier_timing = PhaseTiming::start();
    let verified = super::verify::verify(
        &sandbox,
        task,
        trial_dir,
        Instant::now() + timeouts.verifier,
    )
    .await;
    verifier_timing.finish();
    result.verifier = Some(verifier_timing);
    let failure = match verified {
        Ok(verifier_result) => {
            result.verifier_result = Some(verifier_result);
            None
        }
        Err(failure) => {
            result.verifier_result = failure.partial;
            Some(Failure::new(failure.exception_type, failure.message))
        }
    };
    if let Err(e) = sandbox
        .download_dir("/logs/artifacts", &trial_dir.join("artifacts"))
        .await
    {
        log.line(&format!("collecting /logs/artifacts failed: {e}"));
    }
    failure
}

fn finish_env(
    result: &mut TrialResult,
    mut timing: PhaseTiming,
    failure: Failure,
) -> Option<Failure> {
    timing.finish();
    result.environment_setup = Some(timing);
    Some(failure)
}

/// The task's image, built by the first trial that needs it; later trials wait for it.
async fn image_for<A: Agent>(
    shared: &JobShared<A>,
    task: &Arc<Task>,
    deadline: Duration,
    log: &TrialLog,
) -> Result<ImageInfo, Failure> {
    let cell = shared
        .images
        .get(&task.name)
        .expect("every planned task has an image cell")
        .clone();
    let outcome = cell
        .get_or_init(|| async {
            let started = Instant::now();
            let mut build_log = Vec::new();
            let built = tokio::time::timeout(deadline, ensure_task_image(&shared.client, task, shared.force_build, &mut build_log)).await;
            log.output("build", &build_log);
            let outcome = match built {
                Ok(Ok(info)) => Ok(info),
                Ok(Err(e)) => Err(format!("SandboxBuildFailedError\u{0}{e}")),
                Err(_) => Err(format!("EnvironmentStartTimeoutError\u{0}building the image of task {} timed out after {} seconds", task.name, deadline.as_secs_f64())),
            };
            if let Ok(info) = &outcome {
                let _ = shared.events.send(Event::ImageReady {
                    task: task.name.clone(),
                    tag: info.tag.clone(),
                    id: info.id.clone(),
                    built: info.built,
                    seconds: started.elapsed().as_secs_f64(),
                });
            }
            outcome
        })
        .await;
    outcome.clone().map_err(|e| {
        let (kind, message) = e
            .split_once('\u{0}')
            .unwrap_or(("SandboxBuildFailedError", e.as_str()));
        Failure::new(kind, message)
    })
}

fn counting_sandbox<A: Agent>(
    shared: &JobShared<A>,
    container: &TrialContainer,
    workdir: Option<String>,
    log: &TrialLog,
    exec_nanos: &Arc<AtomicU64>,
) -> DockerSandbox {
    let log = log.clone();
    let sink: crate::docker::OutputSink =
        Arc::new(move |stream: &str, bytes: &[u8]| log.output(stream, bytes));
    DockerSandbox::new(
        shared.client.clone(),
        container.id.clone(),
        workdir,
        Some(sink),
    )
    .with_exec_timer(exec_nanos.clone())
}
