//! `<job>/lock.json`: the resolved inputs of a job (Harbor's `JobLock`, plus image ids).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::multipliers::Multipliers;

use super::job_config::RetryConfig;
use super::trial_config::{AgentConfig, EnvironmentConfig, TrialConfig, VerifierConfig};

/// The tool that ran the job (Harbor writes `harbor`; we write `runner` and also fill `harbor`
/// with our identity so Harbor's reader finds the field).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunnerInfo {
    /// Version.
    pub version: String,
    /// Git commit of the runner build, if known.
    pub git_commit_hash: Option<String>,
    /// Harbor field.
    pub is_editable: bool,
}

/// A task as locked.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LockTask {
    /// Task name.
    pub name: String,
    /// Always `local`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `sha256:<content digest>`.
    pub digest: String,
    /// Dataset name.
    pub source: Option<String>,
    /// Task path.
    pub path: Option<String>,
    /// Runner-only: the image the trial ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Runner-only: the image tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tag: Option<String>,
}

/// One trial as locked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockTrial {
    /// The trial's name (runner-only; Harbor matches trials unordered).
    pub trial_name: String,
    /// The task.
    pub task: LockTask,
    /// Harbor's five timeout multipliers, under their Harbor names.
    #[serde(flatten)]
    pub multipliers: Multipliers,
    /// The agent.
    pub agent: AgentConfig,
    /// The environment.
    pub environment: EnvironmentConfig,
    /// The verifier.
    pub verifier: VerifierConfig,
}

impl LockTrial {
    /// Locks a trial's config: its multipliers, agent, environment and verifier, and `task`.
    pub fn new(config: &TrialConfig, task: LockTask) -> LockTrial {
        LockTrial {
            trial_name: config.trial_name.clone(),
            task,
            multipliers: config.multipliers,
            agent: config.agent.clone(),
            environment: config.environment.clone(),
            verifier: config.verifier.clone(),
        }
    }
}

/// `<job>/lock.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobLock {
    /// Lock schema version.
    pub schema_version: u32,
    /// When written.
    pub created_at: DateTime<Utc>,
    /// Harbor's tool field, filled with the runner's identity.
    pub harbor: RunnerInfo,
    /// The runner that wrote the job.
    pub runner: RunnerInfo,
    /// argv with `--agent-env` values redacted.
    pub invocation: Vec<String>,
    /// Runner-only: the working directory `invocation` ran in, so `runner jobs resume` can
    /// resolve its relative paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Concurrency.
    pub n_concurrent_trials: u32,
    /// Retry settings.
    pub retry: RetryConfig,
    /// Trials.
    pub trials: Vec<LockTrial>,
    /// Runner-only: the dataset digest.
    pub dataset_digest: Option<String>,
    /// Runner-only: image ids by task name.
    pub images: BTreeMap<String, String>,
    /// Runner-only: credentials were allowed into containers (not publishable).
    pub allow_container_secrets: bool,
}
