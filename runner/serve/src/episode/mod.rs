//! One episode: a fresh container of one task, started as a trial's environment is, driven
//! by the policy's actions, graded by the task's own verifier, then removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::{
    Backend, Environment, EnvironmentSpec, ExecObserver, NetworkAccess, OutputSink, ServiceSpec,
};
use serde_json::{Map, json};
use tasks::config::NetworkMode;
use tasks::records::{StorageEnforcement, VerifierResult};
use tasks::{ExecOutput, ExecRequest, Sandbox, SandboxError, Task};

use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::output::cut;
use crate::protocol::{Action, ActionKind, EpisodeState, Observation, StepResult};
use crate::scripts;

mod actions;
mod storage;

/// The `/logs` directories a trial's container has from its start.
const LOG_DIRS: [&str; 3] = ["/logs/agent", "/logs/verifier", "/logs/artifacts"];
/// How long the sweep of the policy's processes may take.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(30);
/// `write_file` content goes into the container in pieces of this many bytes (base64 in a
/// command line; one argument may hold 128 KiB).
const WRITE_CHUNK: usize = 60 * 1024;

type SandboxOf<B> = <<B as Backend>::Environment as Environment>::Sandbox;

/// A background process the policy started (`exec` with `block = false`).
#[derive(Debug, Clone, Copy)]
struct Background {
    pgid: u32,
    offset: u64,
}

/// One running episode.
pub struct Episode<B: Backend> {
    task: Arc<Task>,
    environment: Option<B::Environment>,
    sandbox: SandboxOf<B>,
    user: Option<String>,
    workdir: String,
    dir: PathBuf,
    state: EpisodeState,
    background: BTreeMap<String, Background>,
    /// The container's own processes (its keep-alive), which sweeps spare.
    own_pids: Vec<u32>,
    config: Arc<ServeConfig>,
    /// The network the verifier needs when it differs from the policy's.
    verifier_network: Option<NetworkAccess>,
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
}

/// The network of a mode.
fn access(mode: NetworkMode) -> NetworkAccess {
    match mode {
        NetworkMode::Public => NetworkAccess::Public,
        NetworkMode::NoNetwork | NetworkMode::Allowlist => NetworkAccess::None,
    }
}

/// The policy's and the verifier's networks of a single-step task (Harbor's network plan:
/// an explicit `[agent]`/`[verifier]` `network_mode`, else the environment's).
pub fn networks(task: &Task) -> (NetworkAccess, NetworkAccess) {
    let baseline = task.config.environment.effective_network();
    let agent = task.config.agent.network_mode.unwrap_or(baseline);
    let verifier = task.config.verifier.network_mode.unwrap_or(baseline);
    (access(agent), access(verifier))
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
        let (agent_net, verifier_net) = networks(&task);
        let spec = EnvironmentSpec {
            job_id: config.job_id.clone(),
            trial_name: name,
            task_name: task.name.clone(),
            main: ServiceSpec {
                name: "main".into(),
                image: image.to_owned(),
                cpus: env_config.cpus,
                memory_mb: Some(limits.memory_mb),
                network: agent_net,
                workdir: env_config.workdir.clone(),
                env,
                mounts: Vec::new(),
                writable_dirs: LOG_DIRS.iter().map(|d| d.to_string()).collect(),
            },
            sidecars: Vec::new(),
            observer: ExecObserver::new(sink),
            limits,
            network_switchable: agent_net != verifier_net,
            compose_task: Some(task.clone()),
            trial_dir: dir.clone(),
            gpus: env_config.gpus.unwrap_or(0),
            first_tests: Some(task.tests_dir()),
        };
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
        let mut episode = Episode {
            user: task.config.agent.user.as_ref().map(|u| u.as_exec_user()),
            workdir: env_config.workdir.clone().unwrap_or_default(),
            state: EpisodeState {
                episode_id: Some(episode_id),
                task_id: task.name.clone(),
                task_path: task.dir.display().to_string(),
                terminal_ready: true,
                ..EpisodeState::default()
            },
            task,
            environment: Some(environment),
            sandbox,
            dir,
            background: BTreeMap::new(),
            own_pids: Vec::new(),
            config,
            verifier_network: (agent_net != verifier_net).then_some(verifier_net),
            storage: None,
            started: Instant::now(),
        };
        if let Err(e) = episode.prepare().await {
            episode.remove().await;
            return Err(ServeError::Environment(e));
        }
        if let Some(limit_mb) = storage_mb {
            episode.storage = Some(storage::StorageWatch::start(
                SandboxOf::<B>::clone(&episode.sandbox),
                limit_mb,
                episode.config.limits.storage_check_interval,
                episode.own_pids.clone(),
                storage_looks,
            ));
        }
        Ok(episode)
    }

    /// The workdir, and the task's `environment/` files when it runs a prebuilt image with
    /// no Dockerfile (Harbor uploads them there, as a trial does).
    async fn prepare(&mut self) -> Result<(), String> {
        let listing = self
            .sandbox
            .exec(ExecRequest::runner_own(scripts::list_processes()).timeout(SWEEP_TIMEOUT))
            .await
            .map_err(|e| e.to_string())?;
        self.own_pids = listing
            .stdout
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if self.workdir.is_empty() {
            let pwd = self
                .sandbox
                .exec(
                    ExecRequest::new("pwd")
                        .maybe_user(self.user.as_deref())
                        .bookkeeping(),
                )
                .await
                .map_err(|e| e.to_string())?;
            self.workdir = pwd.stdout.trim().to_owned();
            if self.workdir.is_empty() {
                self.workdir = "/".into();
            }
        }
        let env_dir = self.task.environment_dir();
        let has_files = std::fs::read_dir(&env_dir).is_ok_and(|mut d| d.next().is_some());
        if has_files
            && !env_dir.join("Dockerfile").is_file()
            && !env_dir.join("docker-compose.yaml").exists()
        {
            self.sandbox
                .upload_dir(&env_dir, &self.workdir)
                .await
                .map_err(|e| format!("uploading environment/ to {}: {e}", self.workdir))?;
        }
        Ok(())
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
        StepResult {
            observation: self.observation("reset"),
            reward: Some(0.0),
            done: false,
        }
    }

    fn observation(&self, action_type: &str) -> Observation {
        Observation::new(
            &self.task.name,
            &self.state.task_path,
            &self.task.instruction,
            action_type,
        )
    }

    /// Carries out one action. The episode's `Ending` is returned once it ends (evaluate,
    /// close, or a container that no longer answers).
    pub async fn step(&mut self, action: &Action) -> (StepResult, Option<Ending>) {
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
            ActionKind::Exec if action.block => self.exec(action, obs).await,
            ActionKind::Exec => self.bg_start(action, obs).await,
            ActionKind::Write => self.bg_write(action, obs).await,
            ActionKind::View => self.bg_view(action, obs, 0.0).await,
            ActionKind::Wait => {
                let seconds = action
                    .wait_seconds
                    .unwrap_or(0.0)
                    .clamp(0.0, self.config.exec_timeout.as_secs_f64());
                self.bg_view(action, obs, seconds).await
            }
            ActionKind::Kill => self.bg_kill(action, obs).await,
            ActionKind::WriteFile => self.write_file(action, obs).await,
            ActionKind::Evaluate => return self.evaluate(obs).await,
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

    async fn run(&self, request: ExecRequest) -> Result<ExecOutput, Broken> {
        self.sandbox.exec(request).await.map_err(Broken::from)
    }

    fn as_policy(&self, command: String) -> ExecRequest {
        ExecRequest::new(command)
            .maybe_user(self.user.as_deref())
            .timeout(self.config.exec_timeout)
    }

    /// Kills every process of the policy, runs the task's verifier as a trial does and ends
    /// the episode with its reward.
    async fn evaluate(&mut self, mut obs: Observation) -> (StepResult, Option<Ending>) {
        let mut ending = Ending::default();
        let graded = self.grade().await;
        match graded {
            Ok((result, reward, notes)) => {
                let mut details = Map::new();
                details.insert("tests_passed".into(), json!(reward >= 1.0));
                details.insert("exit_code".into(), json!(result.test_exit_code));
                details.insert("rewards".into(), json!(result.rewards));
                if let Some(checks) = &result.checks {
                    details.insert("checks".into(), json!(checks));
                }
                details.insert("assertions_passed".into(), json!(result.assertions_passed));
                details.insert("assertions_total".into(), json!(result.assertions_total));
                details.insert("leftover_processes".into(), json!(notes));
                obs.output = read_test_output(&self.dir, self.config.max_output_bytes);
                obs.info = details.clone();
                obs.metadata = details;
                ending.reward = Some(reward);
                ending.verifier = Some(result);
            }
            Err((message, kind)) => {
                obs = obs.failed(format!("the verifier failed: {message}"));
                ending.error = Some(message);
                ending.error_type = kind;
            }
        }
        self.remove().await;
        (self.result(obs, ending.reward, true), Some(ending))
    }

    async fn grade(
        &mut self,
    ) -> Result<(VerifierResult, f64, usize), (String, Option<tasks::ExceptionType>)> {
        for (_, bg) in std::mem::take(&mut self.background) {
            let _ = self
                .sandbox
                .exec(ExecRequest::runner_own(scripts::bg_kill(bg.pgid)))
                .await;
        }
        self.sweep().await.map_err(|b| (b.0, None))?;
        if let (Some(network), Some(environment)) = (self.verifier_network, &self.environment) {
            environment
                .set_network(network)
                .await
                .map_err(|e| (format!("switching the network for the verifier: {e}"), None))?;
        }
        let timeout = Duration::from_secs_f64(self.task.config.verifier.timeout_sec.max(1.0));
        let deadline = Instant::now() + timeout;
        let mut notes = verifiers::VerifyNotes::default();
        let outcome = verifiers::verify(&self.sandbox, &self.task, &self.dir, deadline, &mut notes)
            .await
            .map_err(|e| (e.to_string(), Some(e.exception_type())))?;
        let result = outcome.result;
        let reward = headline_reward(result.rewards.as_ref());
        Ok((result, reward, notes.leftover_processes.len()))
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

/// The tests' output the verifier brought back, cut to `max` bytes.
fn read_test_output(dir: &Path, max: usize) -> String {
    let path = dir.join("verifier").join("test-stdout.txt");
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    cut(&text, max, text.len(), false).0
}

/// The container stopped answering.
#[derive(Debug)]
struct Broken(String);

impl From<SandboxError> for Broken {
    fn from(e: SandboxError) -> Self {
        Broken(e.to_string())
    }
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
