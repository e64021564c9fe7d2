//! The environment phase: the shared image, then this trial's environment, its `/logs`
//! directories, the task's `environment/` files for prebuilt images, and the healthcheck.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use adapter::Agent;
use tasks::{ExceptionType, ExecRequest, Sandbox, Task};

use super::record::{finish_timing, start_timing};
use super::{Trial, healthcheck};
use crate::backend::{Backend, BindMount, Environment, EnvironmentSpec, ServiceSpec};
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
            prepare(&sandbox, &task).await?;
            if let Some(check) = &task.config.environment.healthcheck {
                healthcheck::run(&sandbox, check, &self.log).await?;
            }
            Ok::<(), TrialFailure>(())
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
        let env_config = &self.plan.task.config.environment;
        let plan = self.network_plan();
        let network = super::phase_network::access(plan.agent_baseline);
        EnvironmentSpec {
            job_id: self.ctx.job_id.clone(),
            trial_name: self.name().to_owned(),
            task_name: self.plan.task.name.clone(),
            main: ServiceSpec {
                name: "main".into(),
                image: image.to_owned(),
                cpus: env_config.cpus,
                memory_mb: Some(self.limits.memory_mb),
                network,
                workdir: env_config.workdir.clone(),
                env: self.plan.env.clone(),
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
                // Made by the backend as it starts the service (no exec on the trial's path).
                writable_dirs: LOG_DIRS.iter().map(|d| d.to_string()).collect(),
            },
            sidecars: Vec::new(),
            observer: self.observer.clone(),
            limits: self.limits.clone(),
            network_switchable: super::phase_network::NetworkPlan::task_switches(
                &self.plan.task.config,
            ),
            compose_task: Some(self.plan.task.clone()),
            trial_dir: self.dir.clone(),
            gpus: env_config.gpus.unwrap_or(0),
            first_tests: first_tests(&self.plan.task),
        }
    }
}

/// The tests the first isolated verification of `task` will upload as they are, known at
/// the start ([`EnvironmentSpec::first_tests`]): a single-step task's `tests/`, when it is
/// verified in the agent's environment (not one of its own) and holds no `.harborignore` (whose
/// selection is staged at verification, and must not be placed unfiltered before it).
pub fn first_tests(task: &Task) -> Option<PathBuf> {
    let tests = task.tests_dir();
    let as_is = !tasks::file_filter::holds_ignore_file(&task.dir, &tests).unwrap_or(true);
    (!task.is_multi_step() && !super::separate_verifier::is_separate(task, None) && as_is)
        .then_some(tests)
}

/// When the task runs a prebuilt `docker_image` without a Dockerfile, copies `environment/`
/// into the workdir (Harbor uploads it there because no build step could have copied it in).
/// The `/logs` directories already exist: the backend made them as it started the service.
async fn prepare<S: Sandbox>(sandbox: &S, task: &Task) -> Result<(), TrialFailure> {
    let fail = |message: String| TrialFailure::new(ExceptionType::EnvironmentStartError, message);
    let env_dir = task.environment_dir();
    let has_files = std::fs::read_dir(&env_dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    // Harbor's should_upload_environment_dir: not when a build spec (Dockerfile, or a compose
    // file, whose build contexts are its own) is on disk.
    if env_dir.join("Dockerfile").is_file()
        || env_dir.join("docker-compose.yaml").exists()
        || !has_files
    {
        return Ok(());
    }
    let workdir = match &task.config.environment.workdir {
        Some(dir) => dir.clone(),
        None => {
            let pwd = sandbox
                .exec(ExecRequest::new("pwd").bookkeeping())
                .await
                .map_err(|e| fail(e.to_string()))?;
            pwd.stdout.trim().to_owned()
        }
    };
    sandbox
        .upload_dir(&env_dir, &workdir)
        .await
        .map_err(|e| fail(format!("uploading environment/ to {workdir}: {e}")))
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
