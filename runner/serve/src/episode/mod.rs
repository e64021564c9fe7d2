//! One episode: a fresh container of one task, started as a trial's environment is, driven
//! by the policy's actions, graded by the task's own verifier, then removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::phases::{AgentEnvironment, NetworkPlan, TrialLog, ready_environment, switch_network};
use engine::{Backend, Environment, EnvironmentSpec, ExecObserver, OutputSink, SandboxOf};
use serde_json::{Map, Value, json};
use tasks::records::{StepResult as StepRecord, StorageEnforcement, VerifierResult};
use tasks::{ExceptionType, NetworkMode, Task};

use crate::actions::{Broken, Policy};
use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::output::cut;
use crate::protocol::{Action, ActionKind, EpisodeState, Observation, StepResult};

mod steps;
mod storage;
mod verify;

/// One running episode.
pub struct Episode<B: Backend> {
    task: Arc<Task>,
    environment: Option<B::Environment>,
    /// The policy's side of the container: its user, workdir and processes.
    policy: Policy<SandboxOf<B>>,
    dir: PathBuf,
    state: EpisodeState,
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
    storage: Option<storage::StorageWatch>,
    started: Instant,
}

/// What an episode learnt once it ended, for its record.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// The verifier's result, when evaluate ran it.
    pub verifier: Option<VerifierResult>,
    /// The reward evaluate gave.
    pub reward: Option<f64>,
    /// Why it ended without a reward (an error, the idle timeout, a close).
    pub error: Option<String>,
    /// The exception type of that error, when it was the verifier's.
    pub error_type: Option<tasks::ExceptionType>,
    /// Where the (last) verification ran: `shared` or `separate`; `None` for a multi-step
    /// task, whose steps each verify where their own verifier does (as in a trial record).
    pub verifier_environment_mode: Option<String>,
    /// The verified steps of a multi-step task, as a trial records them.
    pub step_results: Option<Vec<StepRecord>>,
}

/// What names an episode: its container's trial name, its record's directory, its id.
#[derive(Debug, Clone)]
pub struct EpisodeNames {
    /// The name (`<task>__<suffix>`), which labels its container as a trial's name does.
    pub name: String,
    /// The directory it is recorded in.
    pub dir: PathBuf,
    /// The id the client gave at reset, or the name.
    pub episode_id: String,
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
        let EpisodeNames {
            name,
            dir,
            episode_id,
        } = names;
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
            state: EpisodeState {
                episode_id: Some(episode_id),
                task_id: task.name.clone(),
                task_path: task.dir.display().to_string(),
                terminal_ready: true,
                ..EpisodeState::default()
            },
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
            started: Instant::now(),
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
            episode.storage = Some(storage::StorageWatch::start(
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

    /// The episode's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The task.
    pub fn task(&self) -> &Arc<Task> {
        &self.task
    }

    /// The episode's state.
    pub fn state(&self) -> &EpisodeState {
        &self.state
    }

    /// Time since the episode started.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }

    /// True while its container is there.
    pub fn is_live(&self) -> bool {
        self.environment.is_some()
    }

    /// The first observation (the instruction).
    pub fn first_observation(&self) -> StepResult {
        let mut observation = self.observation("reset");
        observation.metadata = self.step_metadata();
        StepResult {
            observation,
            reward: Some(0.0),
            done: false,
        }
    }

    /// The instruction the policy works on: the current step's for a multi-step task.
    pub fn instruction(&self) -> &str {
        match self.task.steps.get(self.step) {
            Some(step) if self.task.is_multi_step() => &step.instruction,
            _ => &self.task.instruction,
        }
    }

    fn observation(&self, action_type: &str) -> Observation {
        Observation::new(
            &self.task.name,
            &self.state.task_path,
            self.instruction(),
            action_type,
        )
    }

    /// Carries out one action. The episode's `Ending` is returned once it ends (evaluate,
    /// close, or a container that no longer answers).
    pub async fn step(&mut self, action: &Action, backend: &B) -> (StepResult, Option<Ending>) {
        self.state.step_count += 1;
        self.state.last_action_type = action.action_type.clone();
        self.state.last_command = action.command.clone();
        if let Some(id) = &action.session_id {
            self.state.session_id = id.clone();
        }
        let mut obs = self.observation(&action.action_type);
        obs.session_id = action.session_id.clone();
        if self.environment.is_none() {
            let obs = obs.failed("the episode has ended; reset to start another");
            return (self.result(obs, None, true), None);
        }
        let Some(kind) = ActionKind::parse(&action.action_type) else {
            let obs = obs.failed(format!(
                "unsupported action_type {:?} (exec, write, view, wait, kill, write_file, evaluate, close)",
                action.action_type
            ));
            return (self.result(obs, None, false), None);
        };
        let outcome = match kind {
            ActionKind::Evaluate => return self.evaluate(obs, backend).await,
            ActionKind::Close => {
                let mut obs = obs;
                obs.output = "Closed the episode and removed its container.".into();
                self.remove().await;
                let ending = Ending {
                    error: Some("closed by the policy before evaluate".into()),
                    ..Ending::default()
                };
                return (self.result(obs, None, true), Some(ending));
            }
            policy => self.policy.act(policy, action, obs).await,
        };
        if let Some(message) = self.storage.as_ref().and_then(|w| w.exceeded()) {
            let obs = self
                .observation(&action.action_type)
                .failed(message.clone());
            self.remove().await;
            let ending = Ending {
                error: Some(message),
                error_type: Some(tasks::ExceptionType::StorageLimitExceededError),
                ..Ending::default()
            };
            return (self.result(obs, None, true), Some(ending));
        }
        match outcome {
            Ok(obs) => {
                self.state.last_output = obs.output.clone();
                (self.result(obs, None, false), None)
            }
            Err(Broken(message)) => {
                // The container no longer answers: the episode is over.
                let obs = self.observation(&action.action_type).failed(format!(
                    "the environment failed: {message}; the episode is closed"
                ));
                self.remove().await;
                let ending = Ending {
                    error: Some(message),
                    ..Ending::default()
                };
                (self.result(obs, None, true), Some(ending))
            }
        }
    }

    fn result(&self, observation: Observation, reward: Option<f64>, done: bool) -> StepResult {
        StepResult {
            observation,
            reward,
            done,
        }
    }

    /// Kills every process of the policy and runs the verifier of the task (or of the
    /// current step) as a trial does. A single-step episode ends with its reward; a
    /// multi-step one goes on to the next step or ends as a trial's steps would (see
    /// `steps.rs`).
    async fn evaluate(&mut self, obs: Observation, backend: &B) -> (StepResult, Option<Ending>) {
        let graded = self.grade(backend).await;
        if self.task.is_multi_step() {
            return self.step_evaluated(graded, obs).await;
        }
        let mut obs = obs;
        // Where a single-step task verifies, as a trial records it.
        let mode = engine::phases::trial_verifier_mode(&self.task);
        let mut ending = Ending {
            verifier_environment_mode: mode.map(str::to_owned),
            ..Ending::default()
        };
        match graded {
            Ok(graded) => {
                let reward = headline_reward(graded.result.rewards.as_ref());
                let details = grade_details(&graded, reward);
                let shown = read_test_output(&self.dir, self.config.max_output_bytes);
                obs.output = shown.text;
                obs.info = details.clone();
                obs.info.insert("truncated".into(), json!(shown.truncated));
                obs.info
                    .insert("bytes_dropped".into(), json!(shown.dropped));
                obs.metadata = details;
                ending.reward = Some(reward);
                ending.verifier = Some(graded.result);
            }
            Err(failure) => {
                obs = obs.failed(format!("the verifier failed: {}", failure.message));
                ending.error = Some(failure.message);
                ending.error_type = failure.kind;
            }
        }
        self.remove().await;
        (self.result(obs, ending.reward, true), Some(ending))
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
        self.state.terminal_ready = false;
        self.storage = None;
        if let Some(environment) = self.environment.take()
            && let Err(e) = environment.remove().await
        {
            tracing::warn!("removing episode {}: {e}", self.dir.display());
        }
    }
}

/// The reward of an evaluation: the `reward` key, else the mean of the rewards, else 0.
pub fn headline_reward(rewards: Option<&BTreeMap<String, f64>>) -> f64 {
    let Some(rewards) = rewards.filter(|r| !r.is_empty()) else {
        return 0.0;
    };
    match rewards.get("reward") {
        Some(reward) => *reward,
        None => rewards.values().sum::<f64>() / rewards.len() as f64,
    }
}

/// What an evaluate observation's `info` and `metadata` carry: the verifier's rewards,
/// exit code, named checks with `assertions_passed`/`assertions_total`, and how many
/// processes the policy had left.
fn grade_details(graded: &verify::Graded, reward: f64) -> Map<String, Value> {
    let result = &graded.result;
    let mut details = Map::new();
    details.insert("tests_passed".into(), json!(reward >= 1.0));
    details.insert("exit_code".into(), json!(result.test_exit_code));
    details.insert("rewards".into(), json!(result.rewards));
    if let Some(checks) = &result.checks {
        details.insert("checks".into(), json!(checks));
    }
    details.insert("assertions_passed".into(), json!(result.assertions_passed));
    details.insert("assertions_total".into(), json!(result.assertions_total));
    details.insert("leftover_processes".into(), json!(graded.leftovers));
    details
}

/// The tests' output the verifier brought back into `dir`, cut to `max` bytes.
fn read_test_output(dir: &Path, max: usize) -> crate::output::Cut {
    let path = dir.join("verifier").join("test-stdout.txt");
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    cut(&text, max, text.len(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reward_is_the_reward_key_else_the_mean() {
        let mut rewards = BTreeMap::new();
        assert_eq!(headline_reward(None), 0.0);
        assert_eq!(headline_reward(Some(&rewards)), 0.0);
        rewards.insert("a".to_owned(), 1.0);
        rewards.insert("b".to_owned(), 0.0);
        assert_eq!(headline_reward(Some(&rewards)), 0.5);
        rewards.insert("reward".to_owned(), 1.0);
        assert_eq!(headline_reward(Some(&rewards)), 1.0);
    }
}
