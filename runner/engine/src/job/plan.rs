//! Planning a job: its config.json, lock.json and one trial plan per (attempt, task, agent),
//! in Harbor's order.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tasks::records::{
    AgentConfig, DatasetRef, EnvironmentConfig, JobConfig, JobLock, LockTrial, RunnerInfo,
    TrialConfig, TrialIdentity, TrialTotals, VerifierConfig,
};
use tasks::{Dataset, Multipliers, Task, TaskId};

use super::identity::{AgentFingerprint, trial_identity};
use super::retry_policy::RetryPolicy;
use crate::trial::{TrialPlan, lock_entry, trial_name};

/// Everything the user chose for a job.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// Job name (directory name).
    pub job_name: String,
    /// Where jobs go.
    pub jobs_dir: String,
    /// Trials per task.
    pub k: u32,
    /// Concurrency.
    pub n_concurrent: u32,
    /// Multipliers.
    pub multipliers: Multipliers,
    /// Rebuild images.
    pub force_build: bool,
    /// The agent as recorded.
    pub agent: AgentConfig,
    /// The agent's identity (config, version, source, suffix) for trial identities.
    pub agent_fingerprint: AgentFingerprint,
    /// Which failed trials run again.
    pub retry: RetryPolicy,
    /// Harbor 0.26's `override_error_policy`, checked ([`crate::error_overrides::check`]) and
    /// already applied to `retry`; recorded in the job's and every trial's config, and consulted
    /// when a trial's agent fails and when its exceptions are recorded.
    pub override_error_policy: tasks::error_policy::ErrorPolicyOverrides,
    /// How long past its deadline a phase may run before the watchdog ends the trial.
    pub watchdog_grace: Duration,
    /// Credentials allowed into containers (recorded; not publishable).
    pub allow_container_secrets: bool,
    /// Text appended to every instruction, recorded verbatim.
    pub instruction_suffix: Option<String>,
    /// argv with secret values redacted.
    pub invocation: Vec<String>,
    /// The directory `invocation` ran in (recorded so `runner jobs resume` can replay it).
    pub working_dir: Option<String>,
    /// The git commit the runner binary was built from, when its build recorded one.
    pub runner_commit: Option<String>,
    /// Limits every trial runs under (pids, caps on downloads and trial.log).
    pub limits: crate::limits::LimitSettings,
    /// The LLM bridge trials call models through (`-m` / `--llm-config`), if any.
    pub bridge: Option<crate::context::JobBridge>,
    /// Run the tests with the programs and startup hooks the agent left instead of the
    /// image's own (`--agent-toolchain`; recorded as `verifier.agent_toolchain`).
    pub agent_toolchain: bool,
}

/// A planned job.
#[derive(Debug)]
pub struct JobPlan {
    /// The job's id.
    pub job_id: String,
    /// config.json.
    pub config: JobConfig,
    /// lock.json (image ids filled in as images are ready).
    pub lock: JobLock,
    /// The trials still to run, in launch order.
    pub trials: Vec<PlannedTrial>,
    /// Trials a resume found complete, by their totals (never run again or touched).
    pub done: Vec<TrialTotals>,
    /// Every planned trial (run or done), for coverage.
    pub planned: usize,
    /// When the job first started (a resume keeps the original start).
    pub started_at: Option<DateTime<Utc>>,
    /// This plan continues a job (see [`super::resume::resume`]).
    pub resumed: bool,
    /// Tasks that could not be loaded or planned (malformed, bad env templates), with why.
    pub skipped: Vec<String>,
}

/// One planned trial, kept small: a job plans every trial before the first starts (names
/// must be known for lock.json and a resume), and a whole [`TrialPlan`] is kilobytes, so the
/// plan holds the trial's name and identity key beside its task's [`TaskPlan`] (shared by the
/// task's k trials) and makes the [`TrialPlan`] only when the trial starts.
#[derive(Debug, Clone)]
pub struct PlannedTrial {
    task: Arc<TaskPlan>,
    name: String,
    key: String,
    index: u32,
    /// The number of this run's first attempt: 1, or one more than the attempts a resume
    /// found kept under `attempts/`.
    pub first_attempt: u32,
}

/// What every trial of one task shares: the task, its resolved env, and the trial config
/// and identity but for the trial's name, key, index and job id.
#[derive(Debug)]
struct TaskPlan {
    task: Arc<Task>,
    env: BTreeMap<String, String>,
    config: TrialConfig,
    identity: TrialIdentity,
}

impl PlannedTrial {
    /// The trial's name (its directory's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The task.
    pub fn task(&self) -> &Arc<Task> {
        &self.task.task
    }

    /// The task as the trial's config refers to it.
    pub fn task_ref(&self) -> &tasks::records::TaskRef {
        &self.task.config.task
    }

    /// Which of its task's k trials this is, from 0.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The trial's identity (as in its config).
    pub fn identity(&self) -> TrialIdentity {
        TrialIdentity {
            key: self.key.clone(),
            index: self.index,
            ..self.task.identity.clone()
        }
    }

    /// The trial's config as config.json records it, in job `job_id`.
    pub fn config(&self, job_id: &str) -> TrialConfig {
        TrialConfig {
            trial_name: self.name.clone(),
            job_id: job_id.to_owned(),
            identity: Some(self.identity()),
            ..self.task.config.clone()
        }
    }

    /// The whole plan the trial runs by, in job `job_id`.
    pub fn to_plan(&self, job_id: &str) -> TrialPlan {
        TrialPlan {
            task: self.task.task.clone(),
            config: self.config(job_id),
            env: self.task.env.clone(),
            identity: self.identity(),
            first_attempt: self.first_attempt,
        }
    }
}

impl JobPlan {
    /// The planned tasks still to run, each once, in plan order.
    pub fn tasks(&self) -> Vec<Arc<Task>> {
        let mut seen = HashSet::new();
        self.trials
            .iter()
            .filter(|t| seen.insert(Arc::as_ptr(&t.task)))
            .map(|t| t.task().clone())
            .collect()
    }
}

/// Plans `settings` over the tasks of `dataset`.
pub fn plan_job(dataset: &Dataset, settings: &JobSettings) -> JobPlan {
    let job_id = uuid::Uuid::new_v4().to_string();
    let config = job_config(dataset, settings);
    let (runnable, mut skipped) = runnable_tasks(dataset);
    skipped.splice(0..0, dataset.skipped.iter().map(|e| e.to_string()));
    let tasks = task_plans(runnable, dataset, settings, &config);
    let (trials, lock_trials) = name_trials(&tasks, settings);
    let lock = job_lock(dataset, settings, &config, lock_trials);
    JobPlan {
        job_id,
        config,
        lock,
        planned: trials.len(),
        trials,
        done: Vec::new(),
        started_at: None,
        resumed: false,
        skipped,
    }
}

/// The job's config.json.
fn job_config(dataset: &Dataset, settings: &JobSettings) -> JobConfig {
    JobConfig {
        job_name: settings.job_name.clone(),
        jobs_dir: settings.jobs_dir.clone(),
        n_attempts: settings.k,
        multipliers: settings.multipliers,
        debug: false,
        n_concurrent_trials: settings.n_concurrent,
        quiet: false,
        retry: settings.retry.record(),
        environment: EnvironmentConfig {
            force_build: settings.force_build,
            ..EnvironmentConfig::default()
        },
        verifier: VerifierConfig {
            agent_toolchain: settings.agent_toolchain,
            ..VerifierConfig::default()
        },
        metrics: Vec::new(),
        agents: vec![settings.agent.clone()],
        datasets: vec![DatasetRef {
            path: Some(dataset.dir.display().to_string()),
            name: None,
            version: None,
            reference: None,
            ..DatasetRef::default()
        }],
        tasks: Vec::new(),
        artifacts: Vec::new(),
        extra_instruction_paths: Vec::new(),
        plugins: Vec::new(),
        harbor_026: tasks::records::JobConfig026 {
            override_error_policy: settings.override_error_policy.clone(),
            ..Default::default()
        },
        allow_container_secrets: settings.allow_container_secrets,
        instruction_suffix: settings.instruction_suffix.clone(),
        agent_config: None,
        shard: None,
        n_shards: None,
        task_env_from: Vec::new(),
        merged_from: Vec::new(),
    }
}

/// A task whose `[environment].env` resolved: the task, its env, and the keyed digest of the
/// values drawn from the host.
type Runnable = (Arc<Task>, BTreeMap<String, String>, String);

/// The dataset's tasks whose `[environment].env` resolves, and why the others are skipped.
fn runnable_tasks(dataset: &Dataset) -> (Vec<Runnable>, Vec<String>) {
    let mut skipped = Vec::new();
    let mut runnable = Vec::new();
    for task in &dataset.tasks {
        match task.resolve_env_traced(&task.config.environment.env) {
            Ok(resolved) => {
                // A value drawn from the host is recorded only as a keyed digest.
                let digest = task.host_vars.env_digest(&resolved);
                runnable.push((Arc::new(task.clone()), resolved.env, digest));
            }
            Err(e) => skipped.push(format!(
                "{}: [environment] {e}",
                task.dir.join("task.toml").display()
            )),
        }
    }
    (runnable, skipped)
}

/// Each runnable task's shared part of its trials' plans (config, identity at index 0) and
/// the lock entry its trials' entries are renamed clones of.
fn task_plans(
    runnable: Vec<Runnable>,
    dataset: &Dataset,
    settings: &JobSettings,
    config: &JobConfig,
) -> Vec<(Arc<TaskPlan>, LockTrial)> {
    // Harbor records the dataset as the trial's source (its directory's name); an ad-hoc
    // single task has none.
    let source = dataset.trial_source();
    let trials_dir = Path::new(&settings.jobs_dir)
        .join(&settings.job_name)
        .display()
        .to_string();
    let mut tasks = Vec::new();
    for (task, env, env_digest) in runnable {
        let config = TrialConfig {
            task: TaskId::of(&task).task_ref(source.clone()),
            trial_name: String::new(),
            trials_dir: trials_dir.clone(),
            multipliers: settings.multipliers,
            agent: settings.agent.clone(),
            environment: config.environment.clone(),
            verifier: config.verifier.clone(),
            artifacts: Vec::new(),
            extra_instruction_paths: Vec::new(),
            // Filled in as each trial starts (a resume takes the job's id).
            job_id: String::new(),
            harbor_026: tasks::records::TrialConfig026 {
                override_error_policy: settings.override_error_policy.clone(),
                ..Default::default()
            },
            // Resolved here so the identity covers them; the trial resolves them again
            // (the same pure rule) and records how storage is enforced.
            limits: Some(settings.limits.resolve(&task.config)),
            identity: None,
        };
        let identity = trial_identity(&task, &config, &settings.agent_fingerprint, &env_digest, 0);
        // Every lock entry of the task is a renamed clone of this one, sharing its parts.
        let lock_trial = lock_entry(&task, &config);
        let plan = TaskPlan {
            task,
            env,
            config,
            identity,
        };
        tasks.push((Arc::new(plan), lock_trial));
    }
    tasks
}

/// The planned trials, `k` of each task in Harbor's order (attempt by attempt), named from
/// their identities, with their lock entries.
fn name_trials(
    tasks: &[(Arc<TaskPlan>, LockTrial)],
    settings: &JobSettings,
) -> (Vec<PlannedTrial>, Vec<LockTrial>) {
    let mut trials = Vec::new();
    let mut lock_trials = Vec::new();
    let mut names = HashSet::new();
    for index in 0..settings.k {
        for (task, lock_trial) in tasks {
            // The identity's other fields are the task's; the key covers the index.
            let identity = trial_identity(
                &task.task,
                &task.config,
                &settings.agent_fingerprint,
                &task.identity.task_env,
                index,
            );
            // Seven characters as in Harbor; a longer suffix only if two trials of one job
            // would share a name (deterministic, because the plan's order is).
            let mut length = 7;
            let mut name = trial_name(task.task.short_name(), &identity.key, length);
            while !names.insert(name.to_ascii_lowercase()) {
                length += 1;
                name = trial_name(task.task.short_name(), &identity.key, length);
            }
            lock_trials.push(LockTrial {
                trial_name: name.clone(),
                ..lock_trial.clone()
            });
            trials.push(PlannedTrial {
                task: task.clone(),
                name,
                key: identity.key,
                index,
                first_attempt: 1,
            });
        }
    }
    (trials, lock_trials)
}

/// The job's lock.json (image ids filled in as images are ready).
fn job_lock(
    dataset: &Dataset,
    settings: &JobSettings,
    config: &JobConfig,
    trials: Vec<LockTrial>,
) -> JobLock {
    let runner = RunnerInfo {
        version: tasks::RUNNER_VERSION.to_owned(),
        git_commit_hash: settings.runner_commit.clone(),
        is_editable: false,
    };
    JobLock {
        engine_images: Default::default(),
        schema_version: tasks::records::JOB_LOCK_SCHEMA,
        created_at: Utc::now(),
        harbor: runner.clone(),
        runner,
        invocation: settings.invocation.clone(),
        working_dir: settings.working_dir.clone(),
        n_concurrent_trials: settings.n_concurrent,
        retry: config.retry.clone(),
        trials,
        dataset_digest: Some(dataset.digest()),
        images: BTreeMap::new(),
        allow_container_secrets: settings.allow_container_secrets,
    }
}
