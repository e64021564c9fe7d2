//! One episode: a fresh container of one task, started as a trial's environment is, driven
//! by the policy's actions, graded by the task's own verifier, then removed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use engine::phases::{AgentEnvironment, NetworkPlan, TrialLog, ready_environment, switch_network};
use engine::{Backend, Environment, EnvironmentSpec, ExecObserver, OutputSink, SandboxOf};
use tasks::records::{StepResult as StepRecord, StorageEnforcement};
use tasks::{ExceptionType, NetworkMode, Task};

use crate::actions::{Broken, Policy};
use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::protocol::{Action, ActionKind, Observation};
use crate::storage_watch::StorageWatch;

mod steps;
mod verify;

pub use steps::AfterStep;
pub use verify::{GradeFailure, Graded};

/// One running episode.
pub struct Episode<B: Backend> {
    task: Arc<Task>,
    environment: Option<B::Environment>,
    /// The policy's side of the container: its user, workdir and processes.
    policy: Policy<SandboxOf<B>>,
    dir: PathBuf,
    config: Arc<ServeConfig>,
    /// The agent environment's spec, from which a separate verifier's container is made.
    spec: EnvironmentSpec,
    /// The network the container is on now (the policy's, or the verifier's while it runs).
    network: NetworkMode,
    /// The step the policy works on (always 0 for a single-step task).
    step: usize,
    /// The results of the steps verified so far (a multi-step task's).
    step_results: Vec<StepRecord>,
    /// `trial.log` of the episode: step setup, separate verifiers, leftovers.
    log: TrialLog,
    /// The watch of `storage_mb` (none when the driver enforces it, or before `prepare`).
    storage: Option<StorageWatch>,
}

/// What names an episode: its container's trial name and its record's directory.
#[derive(Debug, Clone)]
pub struct EpisodeNames {
    /// The name (`<task>__<suffix>`), which labels its container as a trial's name does.
    pub name: String,
    /// The directory it is recorded in.
    pub dir: PathBuf,
}

impl<B: Backend> Episode<B> {
    /// Starts an episode of `task` from `image` (the image id), named and recorded as
    /// `names` says; its `storage_mb` watch takes turns with the server's other episodes
    /// through `storage_looks`.
    pub async fn start(
        backend: &B,
        task: Arc<Task>,
        image: &str,
        names: EpisodeNames,
        config: Arc<ServeConfig>,
        sink: OutputSink,
        storage_looks: Arc<tokio::sync::Semaphore>,
    ) -> Result<Episode<B>, ServeError> {
        let EpisodeNames { name, dir } = names;
        let env_config = &task.config.environment;
        let env = task
            .resolve_env(&env_config.env)
            .map_err(|e| ServeError::TaskEnv {
                task: task.name.clone(),
                message: e.to_string(),
            })?;
        let limits = config.limits.resolve(&task.config);
        // A multi-step task's container starts on its baseline, as a trial's: each step is
        // prepared under it, then switched to the step's agent network (`begin_step`).
        let plan = NetworkPlan::resolve(&task.config, task.config.steps.first());
        let agent_net = if task.is_multi_step() {
            plan.agent_baseline
        } else {
            plan.agent_phase
        };
        // Made as a trial's agent environment is, with no agent mounts: the policy is outside.
        let spec = AgentEnvironment {
            job_id: config.job_id.clone(),
            session: name,
            task: &task,
            image,
            env,
            limits,
            network: engine::phases::access(agent_net),
            mounts: Vec::new(),
            observer: ExecObserver::new(sink),
            dir: dir.clone(),
        }
        .spec();
        std::fs::create_dir_all(&dir).map_err(|source| ServeError::Record {
            path: dir.clone(),
            source,
        })?;
        let deadline = Duration::from_secs_f64(env_config.build_timeout_sec.max(1.0));
        let environment = tokio::time::timeout(deadline, backend.start_environment(&spec))
            .await
            .map_err(|_| ServeError::StartTimeout(deadline.as_secs()))?
            .map_err(|e| ServeError::Environment(e.to_string()))?;
        let sandbox = environment.main().clone();
        let watched = environment.storage_enforcement() == StorageEnforcement::Watched;
        let storage_mb = spec.limits.storage_mb.filter(|_| watched);
        let log = TrialLog::open(&dir.join("trial.log"), spec.limits.trial_log_cap_bytes);
        let user = task.config.agent.user.as_ref().map(|u| u.as_exec_user());
        let workdir = env_config.workdir.clone().unwrap_or_default();
        let mut episode = Episode {
            policy: Policy::new(sandbox, user, workdir, &config),
            task,
            environment: Some(environment),
            dir,
            config,
            spec,
            network: agent_net,
            step: 0,
            step_results: Vec::new(),
            log,
            storage: None,
        };
        if let Err(e) = episode.prepare().await {
            episode.remove().await;
            return Err(ServeError::Environment(e));
        }
        if episode.task.is_multi_step()
            && let Err(failure) = episode.begin_step(0).await
        {
            episode.remove().await;
            return Err(ServeError::Environment(format!(
                "task {}: step {:?}: {}: {}",
                episode.task.name, episode.task.config.steps[0].name, failure.kind, failure.message
            )));
        }
        if let Some(limit_mb) = storage_mb {
            episode.storage = Some(StorageWatch::start(
                SandboxOf::<B>::clone(episode.policy.sandbox()),
                limit_mb,
                episode.config.limits.storage_check_interval,
                episode.policy.own_pids().to_vec(),
                storage_looks,
            ));
        }
        Ok(episode)
    }

    /// The policy's workdir, then the container readied as a trial's is
    /// ([`engine::phases::ready_environment`]: the task's `environment/` files when it runs a
    /// prebuilt image with no Dockerfile, then its healthcheck) within the task's build
    /// timeout; what runs then is the task's own (sweeps spare it). The error is the client's
    /// text.
    async fn prepare(&mut self) -> Result<(), String> {
        let workdir = self
            .policy
            .find_workdir()
            .await
            .map_err(|e| e.to_string())?;
        let workdir = workdir.to_owned();
        let limit =
            Duration::from_secs_f64(self.task.config.environment.build_timeout_sec.max(1.0));
        let sandbox = self.policy.sandbox();
        let ready = ready_environment(sandbox, &self.task, Some(&workdir), &self.log);
        match tokio::time::timeout(limit, ready).await {
            Ok(Ok(())) => {}
            // The upload's failure names itself; any other is the healthcheck's.
            Ok(Err(failure)) if failure.kind == ExceptionType::EnvironmentStartError => {
                return Err(failure.message);
            }
            Ok(Err(failure)) => return Err(format!("the task's healthcheck: {}", failure.message)),
            Err(_) => {
                return Err(format!(
                    "the environment/ upload and the task's healthcheck took longer than {} s",
                    limit.as_secs()
                ));
            }
        }
        let spared = self.policy.spare_running_processes().await;
        spared.map_err(|e| e.to_string())
    }

    /// The task.
    pub fn task(&self) -> &Arc<Task> {
        &self.task
    }

    /// The server's settings the episode runs under.
    pub fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// True while its container is there.
    pub fn is_live(&self) -> bool {
        self.environment.is_some()
    }

    /// The instruction the policy works on: the current step's for a multi-step task.
    pub fn instruction(&self) -> &str {
        match self.task.steps.get(self.step) {
            Some(step) if self.task.is_multi_step() => &step.instruction,
            _ => &self.task.instruction,
        }
    }

    /// Carries out one of the policy's actions (`kind`: neither `evaluate` nor `close`) into
    /// `obs`; the error is a container that no longer answers.
    pub async fn act(
        &mut self,
        kind: ActionKind,
        action: &Action,
        obs: Observation,
    ) -> Result<Observation, Broken> {
        self.policy.act(kind, action, obs).await
    }

    /// Why the episode must end, once its `storage_mb` watch saw the limit passed.
    pub fn storage_exceeded(&self) -> Option<String> {
        self.storage.as_ref().and_then(|w| w.exceeded())
    }

    /// Moves the container to `target` for `phase` as a trial moves its own
    /// ([`engine::phases::switch_network`]; nothing when it is there already).
    async fn set_network(
        &mut self,
        target: NetworkMode,
        phase: &str,
    ) -> Result<(), engine::TrialFailure> {
        let Some(environment) = &self.environment else {
            return Ok(());
        };
        switch_network(environment, &self.log, phase, self.network, target).await?;
        self.network = target;
        Ok(())
    }

    /// Removes the container (idempotent).
    pub async fn remove(&mut self) {
        self.storage = None;
        if let Some(environment) = self.environment.take()
            && let Err(e) = environment.remove().await
        {
            tracing::warn!("removing episode {}: {e}", self.dir.display());
        }
    }
}
