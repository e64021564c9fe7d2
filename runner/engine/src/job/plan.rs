//! Planning a job: its config.json, lock.json and one trial plan per (attempt, task, agent),
//! in Harbor's order.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tasks::records::{
    AgentConfig, DatasetRef, EnvironmentConfig, JobConfig, JobLock, LockTask, LockTrial,
    RunnerInfo, TrialConfig, TrialResult, VerifierConfig,
};
use tasks::{Dataset, Multipliers, Task, TaskId, template};

use super::identity::{AgentFingerprint, trial_identity};
use super::retry::RetryPolicy;
use crate::trial::{TrialPlan, trial_name};

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
    pub bridge: Option<crate::trial::JobBridge>,
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
    pub trials: Vec<TrialPlan>,
    /// Trials a resume found complete, by their records (never run again or touched).
    pub done: Vec<TrialResult>,
    /// Every planned trial (run or done), for coverage.
    pub planned: usize,
    /// When the job first started (a resume keeps the original start).
    pub started_at: Option<DateTime<Utc>>,
    /// This plan continues a job (see [`super::resume::resume`]).
    pub resumed: bool,
    /// Tasks that could not be loaded or planned (malformed, bad env templates), with why.
    pub skipped: Vec<String>,
}

/// Plans `settings` over the tasks of `dataset`.
pub fn plan_job(dataset: &Dataset, settings: &JobSettings) -> JobPlan {
    let job_id = uuid::Uuid::new_v4().to_string();
    let dataset_digest = dataset.digest();
    let config = JobConfig {
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
        verifier: VerifierConfig::default(),
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
        allow_container_secrets: settings.allow_container_secrets,
        instruction_suffix: settings.instruction_suffix.clone(),
    };
    let mut skipped: Vec<String> = dataset.skipped.iter().map(|e| e.to_string()).collect();
    let mut runnable: Vec<(Arc<Task>, BTreeMap<String, String>)> = Vec::new();
    for task in &dataset.tasks {
        match template::resolve_env(&task.config.environment.env) {
            Ok(env) => runnable.push((Arc::new(task.clone()), env)),
            Err(e) => skipped.push(format!(
                "{}: [environment] {e}",
                task.dir.join("task.toml").display()
            )),
        }
    }
    // Harbor records the dataset as the trial's source; an ad-hoc single task has none.
    let source = (!dataset.single_task).then(|| dataset.name.clone());
    let mut trials = Vec::new();
    let mut names = HashSet::new();
    for index in 0..settings.k {
        for (task, env) in &runnable {
            let mut trial_config = TrialConfig {
                task: TaskId::of(task).task_ref(source.clone()),
                trial_name: String::new(),
                trials_dir: Path::new(&settings.jobs_dir)
                    .join(&settings.job_name)
                    .display()
                    .to_string(),
                multipliers: settings.multipliers,
                agent: settings.agent.clone(),
                environment: config.environment.clone(),
                verifier: config.verifier.clone(),
                artifacts: Vec::new(),
                extra_instruction_paths: Vec::new(),
                job_id: job_id.clone(),
                // Resolved here so the identity covers them; the trial resolves them again
                // (the same pure rule) and records how storage is enforced.
                limits: Some(settings.limits.resolve(&task.config)),
                identity: None,
            };
            let identity =
                trial_identity(task, &trial_config, &settings.agent_fingerprint, env, index);
            // Seven characters as in Harbor; a longer suffix only if two trials of one job
            // would share a name (deterministic, because the plan's order is).
            let mut length = 7;
            let mut name = trial_name(task.short_name(), &identity.key, length);
            while !names.insert(name.to_ascii_lowercase()) {
                length += 1;
                name = trial_name(task.short_name(), &identity.key, length);
            }
            trial_config.trial_name = name;
            trial_config.identity = Some(identity.clone());
            trials.push(TrialPlan {
                task: task.clone(),
                config: trial_config,
                env: env.clone(),
                identity,
                first_attempt: 1,
            });
        }
    }
    let runner = RunnerInfo {
        version: tasks::RUNNER_VERSION.to_owned(),
        git_commit_hash: settings.runner_commit.clone(),
        is_editable: false,
    };
    let lock = JobLock {
        schema_version: 1,
        created_at: Utc::now(),
        harbor: runner.clone(),
        runner,
        invocation: settings.invocation.clone(),
        working_dir: settings.working_dir.clone(),
        n_concurrent_trials: settings.n_concurrent,
        retry: config.retry.clone(),
        trials: trials
            .iter()
            .map(|t| {
                let task = LockTask {
                    name: t.task.name.clone(),
                    kind: "local".into(),
                    digest: t.task.digest.clone(),
                    source: source.clone(),
                    path: Some(t.task.dir.display().to_string()),
                    image_id: None,
                    image_tag: None,
                    image: None,
                };
                LockTrial::new(&t.config, task)
            })
            .collect(),
        dataset_digest: Some(dataset_digest),
        images: BTreeMap::new(),
        allow_container_secrets: settings.allow_container_secrets,
    };
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
