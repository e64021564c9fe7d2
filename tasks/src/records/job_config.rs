//! `<job>/config.json`: Harbor's `JobConfig`.

use super::harbor_026::JobConfig026;
use serde::{Deserialize, Serialize};

use crate::exception::ExceptionType;
use crate::multipliers::Multipliers;

use super::trial_config::{AgentConfig, EnvironmentConfig, VerifierConfig};

/// Harbor's retry settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RetryConfig {
    /// Retries per trial.
    pub max_retries: u32,
    /// Only these exception types are retried.
    pub include_exceptions: Option<Vec<ExceptionType>>,
    /// These exception types are never retried.
    pub exclude_exceptions: Vec<ExceptionType>,
    /// Backoff factor.
    pub wait_multiplier: f64,
    /// Minimum wait.
    pub min_wait_sec: f64,
    /// Maximum wait.
    pub max_wait_sec: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retries: 0,
            include_exceptions: None,
            exclude_exceptions: vec![
                ExceptionType::VerifierOutputParseError,
                ExceptionType::VerifierTimeoutError,
                ExceptionType::AgentTimeoutError,
                ExceptionType::RewardFileEmptyError,
                ExceptionType::RewardFileNotFoundError,
            ],
            wait_multiplier: 1.0,
            min_wait_sec: 1.0,
            max_wait_sec: 60.0,
        }
    }
}

/// A dataset of a job.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DatasetRef {
    /// Local dataset path.
    pub path: Option<String>,
    /// Package name.
    pub name: Option<String>,
    /// Version.
    pub version: Option<String>,
    /// `sha256:<dataset digest>`.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// Harbor field.
    pub registry_url: Option<String>,
    /// Harbor field.
    pub registry_path: Option<String>,
    /// Harbor field.
    pub overwrite: bool,
    /// Harbor field.
    pub download_dir: Option<String>,
    /// Task name filters.
    pub task_names: Option<Vec<String>>,
    /// Task name exclusions.
    pub exclude_task_names: Option<Vec<String>>,
    /// Task count limit.
    pub n_tasks: Option<u32>,
    /// Harbor 0.26: a git repository the dataset comes from (runner runs local datasets:
    /// null; absent in older records).
    #[serde(default)]
    pub repo: Option<String>,
}

/// `<job>/config.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobConfig {
    /// The job's name (directory name).
    pub job_name: String,
    /// Where jobs are written.
    pub jobs_dir: String,
    /// k.
    pub n_attempts: u32,
    /// Harbor's five timeout multipliers, under their Harbor names.
    #[serde(flatten)]
    pub multipliers: Multipliers,
    /// Harbor field.
    pub debug: bool,
    /// Concurrency.
    pub n_concurrent_trials: u32,
    /// Harbor field.
    pub quiet: bool,
    /// Retry settings.
    pub retry: RetryConfig,
    /// Environment settings.
    pub environment: EnvironmentConfig,
    /// Verifier settings.
    pub verifier: VerifierConfig,
    /// Metrics (empty: mean).
    pub metrics: Vec<serde_json::Value>,
    /// Agents.
    pub agents: Vec<AgentConfig>,
    /// Datasets.
    pub datasets: Vec<DatasetRef>,
    /// Ad-hoc tasks.
    pub tasks: Vec<serde_json::Value>,
    /// Artifacts.
    pub artifacts: Vec<serde_json::Value>,
    /// Extra instructions.
    pub extra_instruction_paths: Vec<String>,
    /// Plugins.
    pub plugins: Vec<serde_json::Value>,
    /// Harbor 0.26's additions, at their defaults.
    #[serde(flatten)]
    pub harbor_026: JobConfig026,
    /// Runner-only: the user opted in to passing credentials into containers. Such a job is
    /// not publishable; validation rejects it.
    #[serde(default)]
    pub allow_container_secrets: bool,
    /// Runner-only: text the agent config appends to every instruction, recorded verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_suffix: Option<String>,
    /// Runner-only: the installed agent's config file (absolute), so `runner run -c` with this
    /// config runs the same agent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_config: Option<String>,
    /// Runner-only: which part of the plan this job runs (`runner run --shard I/N`, from 1);
    /// absent for a whole job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// Runner-only: how many parts the plan was split into (with `shard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_shards: Option<u32>,
    /// Runner-only: the host variables task env templates may read (`--task-env-from`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_env_from: Vec<String>,
    /// Runner-only: the ids of the jobs `runner merge` made this job from (their trials keep
    /// the job id they ran under, so validation counts them as this job's); empty for a job
    /// that ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
}
