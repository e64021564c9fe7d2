//! The environment phase: the shared image, then this trial's environment, its `/logs`
//! directories, the task's `environment/` files for prebuilt images, and the healthcheck.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapter::Agent;
use tasks::records::TrialLimits;
use tasks::{ExceptionType, ExecRequest, Sandbox, Task};

use super::log::TrialLog;
use super::record::{finish_timing, start_timing};
use super::{Trial, healthcheck};
use crate::backend::{
    Backend, BindMount, Environment, EnvironmentSpec, ExecObserver, NetworkAccess, ServiceSpec,
};
use crate::events::{Event, Phase};
use crate::failure::TrialFailure;

const LOG_DIRS: [&str; 3] = ["/logs/agent", "/logs/verifier", "/logs/artifacts"];

impl<B: Backend> Trial<B> {
    /// Prepares the image (shared), starts the environment and makes it ready for the agent.
    /// The start, preparation and healthcheck together must finish within the environment
    /// build timeout, so no healthcheck can hang the trial.
    pub(super) async fn environment(&mut self) -> Result<(), TrialFailure> {
        start_timing(&mut self.result.environment_setup);
        self.enter(Phase::Image);
        let waited = Instant::now();
        let task = self.plan.task.clone();
        let image = self
            .ctx
            .image_job()
            .image_for(
                &task,
                self.timeouts.environment_build,
                &self.observer.output,
            )
            .await?;
        self.image_wait = waited.elapsed();
        self.enter(Phase::Environment);
        let deadline = self.timeouts.environment_build;
        let spec = self.with_bridge(self.environment_spec(&image.id)).await?;
        let spec = self.with_egress(spec).await?;
        let ready = tokio::time::timeout(deadline, async {
            let environment = self.ctx.backend.start_environment(&spec).await?;
            self.log.line(&format!(
                "started {} from {} ({})",
                environment.describe(),
                image.tag,
                image.id
            ));
            self.result.engine = environment.engine().map(str::to_owned);
            if let Some(engine) = &self.result.engine {
                self.ctx.emit(Event::Placed {
                    trial: self.name().to_owned(),
                    engine: engine.clone(),
                });
            }
            let sandbox = environment.main().clone();
            let enforcement = environment.storage_enforcement();
            // Stored before anything else can fail, so teardown always finds it.
            self.environment = Some(environment);
            self.record_storage_enforcement(enforcement);
            let workdir = task.config.environment.workdir.as_deref();
            ready_environment(&sandbox, &task, workdir, &self.log).await
        })
        .await;
        finish_timing(&mut self.result.environment_setup);
        match ready {
            Ok(result) => result,
            Err(_) => Err(TrialFailure::new(
                ExceptionType::EnvironmentStartTimeoutError,
                format!(
                    "Environment start timed out after {} seconds",
                    deadline.as_secs_f64()
                ),
            )),
        }
    }

    pub(super) fn environment_spec(&self, image: &str) -> EnvironmentSpec {
        let plan = self.network_plan();
        AgentEnvironment {
            job_id: self.ctx.job_id.clone(),
            session: self.name().to_owned(),
            task: &self.plan.task,
            image,
            env: self.plan.env.clone(),
            limits: self.limits.clone(),
            network: super::phase_network::access(plan.agent_baseline),
            // The agent's prepared files (fetched once on the host), read-only.
            mounts: self
                .ctx
                .agent
                .host_mounts()
                .into_iter()
                .map(|m| BindMount {
                    host: m.host,
                    container: m.container,
                    read_only: true,
                    tests_egress: false,
                })
                .collect(),
            observer: self.observer.clone(),
            dir: self.dir.clone(),
        }
        .spec()
    }
}

/// What the agent's environment of one session is made from: a trial's, or a `runner serve`
/// episode's (which starts one as a trial does, on the network and with the mounts it needs).
pub struct AgentEnvironment<'a> {
    /// The job (or server) the environment belongs to.
    pub job_id: String,
    /// The trial's (or episode's) name, which labels its containers.
    pub session: String,
    /// The task.
    pub task: &'a Arc<Task>,
    /// The image id or reference the main service runs.
    pub image: &'a str,
    /// The task's `[environment].env`, resolved.
    pub env: BTreeMap<String, String>,
    /// The resolved limits.
    pub limits: TrialLimits,
    /// The network the main service starts on.
    pub network: NetworkAccess,
    /// Host files bound read-only into the main service.
    pub mounts: Vec<BindMount>,
    /// Where commands' output goes.
    pub observer: ExecObserver,
    /// The session's directory on the host.
    pub dir: PathBuf,
}

impl AgentEnvironment<'_> {
    /// The environment's spec: the task's resources and workdir, the `/logs` directories made
    /// as the service starts, switchable when any phase of the task changes its network, and
    /// the first tests the backend may place early.
    pub fn spec(self) -> EnvironmentSpec {
        let task = self.task;
        let env_config = &task.config.environment;
        EnvironmentSpec {
            job_id: self.job_id,
            trial_name: self.session,
            task_name: task.name.clone(),
            main: ServiceSpec {
                name: "main".into(),
                image: self.image.to_owned(),
                cpus: env_config.cpus,
                memory_mb: Some(self.limits.memory_mb),
                network: self.network,
                workdir: env_config.workdir.clone(),
                env: self.env,
                mounts: self.mounts,
                // Made by the backend as it starts the service (no exec on the trial's path).
                writable_dirs: LOG_DIRS.iter().map(|d| d.to_string()).collect(),
            },
            sidecars: Vec::new(),
            observer: self.observer,
            limits: self.limits,
            network_switchable: super::phase_network::NetworkPlan::task_switches(&task.config),
            compose_task: Some(task.clone()),
            trial_dir: self.dir,
            gpus: env_config.gpus.unwrap_or(0),
            first_tests: first_tests(task),
        }
    }
}

/// The tests the first isolated verification of `task` will upload as they are, known at
/// the start ([`EnvironmentSpec::first_tests`]): a single-step task's `tests/`, when it is
/// verified in the agent's environment (not one of its own) and holds no `.harborignore` (whose
/// selection is staged at verification, and must not be placed unfiltered before it).
pub(crate) fn first_tests(task: &Task) -> Option<PathBuf> {
    let tests = task.tests_dir();
    let as_is = !tasks::file_filter::holds_ignore_file(&task.dir, &tests).unwrap_or(true);
    (!task.is_multi_step() && !super::separate_verifier::is_separate(task, None) && as_is)
        .then_some(tests)
}

/// Readies a started agent environment for its agent, as a trial's environment phase and a
/// `runner serve` episode's start both do: the task's `environment/` uploaded into `workdir`
/// (`None`: the container's own) when Harbor would ([`uploads_environment_dir`]), then the
/// task's healthcheck. The caller bounds it. An upload's failure is an
/// `EnvironmentStartError`; the healthcheck's are its own ([`healthcheck::run`]).
pub async fn ready_environment<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    workdir: Option<&str>,
    log: &TrialLog,
) -> Result<(), TrialFailure> {
    prepare(sandbox, task, workdir).await?;
    if let Some(check) = &task.config.environment.healthcheck {
        healthcheck::run(sandbox, check, log).await?;
    }
    Ok(())
}

/// When the task runs a prebuilt `docker_image` without a Dockerfile, copies `environment/`
/// into the workdir (Harbor uploads it there because no build step could have copied it in).
/// The `/logs` directories already exist: the backend made them as it started the service.
async fn prepare<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    workdir: Option<&str>,
) -> Result<(), TrialFailure> {
    let fail = |message: String| TrialFailure::new(ExceptionType::EnvironmentStartError, message);
    if !uploads_environment_dir(task) {
        return Ok(());
    }
    let workdir = match workdir {
        Some(dir) => dir.to_owned(),
        None => {
            let pwd = sandbox
                .exec(ExecRequest::new("pwd").bookkeeping())
                .await
                .map_err(|e| fail(e.to_string()))?;
            pwd.stdout.trim().to_owned()
        }
    };
    sandbox
        .upload_dir(&task.environment_dir(), &workdir)
        .await
        .map_err(|e| fail(format!("uploading environment/ to {workdir}: {e}")))
}

/// Harbor's `should_upload_environment_dir`: `environment/` holds files and no build spec
/// (Dockerfile, or a compose file, whose build contexts are its own) is on disk.
fn uploads_environment_dir(task: &Task) -> bool {
    let env_dir = task.environment_dir();
    let has_files = std::fs::read_dir(&env_dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    has_files
        && !env_dir.join("Dockerfile").is_file()
        && !env_dir.join("docker-compose.yaml").exists()
}

/// The longest teardown may take; past it the job's sweep (by label) removes what is left.
const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(120);

impl<B: Backend> Trial<B> {
    /// Removes the environment, whatever state the trial ended in. The removal is bounded by
    /// the watchdog's grace: a removal that hangs is left to the job's sweep and the reaper.
    pub(super) async fn teardown(&mut self) {
        self.enter(Phase::Teardown);
        if let Some(environment) = self.environment.take() {
            let what = environment.describe();
            match tokio::time::timeout(TEARDOWN_TIMEOUT, environment.remove()).await {
                Ok(Ok(())) => self.log.line(&format!("removal of {what} requested")),
                Ok(Err(e)) => self.log.line(&format!(
                    "removing {what} failed: {e}; the job's sweep or the next run reaps it"
                )),
                Err(_) => {
                    let text = format!(
                        "removing {what} took longer than {} s; the job's sweep or the next run reaps it",
                        TEARDOWN_TIMEOUT.as_secs()
                    );
                    self.warn(&text);
                }
            }
        }
        self.log_phase_end(self.clock.leave());
    }
}
