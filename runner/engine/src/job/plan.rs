//! Planning a job: its config.json, lock.json and one trial plan per (attempt, task, agent),
//! in Harbor's order.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use chrono::Utc;
use tasks::records::{
    AgentConfig, DatasetRef, EnvironmentConfig, JobConfig, JobLock, LockTask, LockTrial,
    RetryConfig, RunnerInfo, TrialConfig, VerifierConfig,
};
use tasks::{Dataset, Multipliers, Task, TaskId, template};

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
    /// Credentials allowed into containers (recorded; not publishable).
    pub allow_container_secrets: bool,
    /// Text appended to every instruction, recorded verbatim.
    pub instruction_suffix: Option<String>,
    /// argv with secret values redacted.
    pub invocation: Vec<String>,
    /// The git commit the runner binary was built from, when its build recorded one.
    pub runner_commit: Option<String>,
    /// Limits every trial runs under (pids, caps on downloads and trial.log).
    pub limits: crate::limits::LimitSettings,
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
    /// The trials in launch order.
    pub trials: Vec<TrialPlan>,
    /// Tasks that could not be planned (bad env templates), with why.
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
        retry: RetryConfig::default(),
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
    let mut skipped = Vec::new();
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
    for _attempt in 0..settings.k {
        for (task, env) in &runnable {
            let trial_config = TrialConfig {
                task: TaskId::of(task).task_ref(source.clone()),
                trial_name: trial_name(task.short_name()),
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
                // Filled in by the trial, which resolves them against its task.
                limits: None,
            };
            trials.push(TrialPlan {
                task: task.clone(),
                config: trial_config,
                env: env.clone(),
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
        trials,
        skipped,
    }
}
