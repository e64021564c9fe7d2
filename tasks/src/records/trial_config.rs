//! `<trial>/config.json`: Harbor's `TrialConfig`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::containment::TrialLimits;
use super::harbor_026::{AgentConfig026, EnvironmentConfig026, TrialConfig026};
use crate::multipliers::Multipliers;

/// Which task a trial runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TaskRef {
    /// Local task path (null for package tasks).
    pub path: Option<String>,
    /// Git URL (unused).
    pub git_url: Option<String>,
    /// Git commit (unused).
    pub git_commit_id: Option<String>,
    /// `org/name` or the task's name.
    pub name: Option<String>,
    /// `sha256:<content digest>`.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// Harbor field, always false here.
    pub overwrite: bool,
    /// Harbor field, always null here.
    pub download_dir: Option<String>,
    /// The dataset name.
    pub source: Option<String>,
}

/// One agent of a job: Harbor's `AgentConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AgentConfig {
    /// The agent's name; must equal each trial's `agent_info.name`.
    pub name: Option<String>,
    /// Harbor's Python import path (always null here).
    pub import_path: Option<String>,
    /// `provider/model`.
    pub model_name: Option<String>,
    /// Skills (unused).
    pub skills: Vec<serde_json::Value>,
    /// Must stay null for leaderboards.
    pub override_timeout_sec: Option<f64>,
    /// Must stay null for leaderboards.
    pub override_setup_timeout_sec: Option<f64>,
    /// Must stay null for leaderboards.
    pub max_timeout_sec: Option<f64>,
    /// Extra allowed hosts (unused).
    pub extra_allowed_hosts: Vec<String>,
    /// Agent kwargs, e.g. `reasoning_effort`.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// Env names passed to the container; values are redacted when they look sensitive.
    pub env: BTreeMap<String, String>,
    /// MCP servers (unused).
    pub mcp_servers: Vec<serde_json::Value>,
    /// Harbor 0.26's additions, at their defaults.
    #[serde(flatten)]
    pub harbor_026: AgentConfig026,
    /// Runner-only: every model the agent was allowed to call through the LLM bridge
    /// (`model_name` is the first); absent when no bridge ran. `validate-submission`'s
    /// `declared_models_only` accepts calls of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// Harbor's `EnvironmentConfig`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnvironmentConfig {
    /// Backend type.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Import path (null).
    pub import_path: Option<String>,
    /// Rebuild images even when cached.
    pub force_build: bool,
    /// Remove containers at trial end.
    pub delete: bool,
    /// Harbor field.
    pub cpu_enforcement_policy: String,
    /// Harbor field.
    pub memory_enforcement_policy: String,
    /// Must stay null for leaderboards.
    pub override_cpus: Option<f64>,
    /// Must stay null for leaderboards.
    pub override_memory_mb: Option<u64>,
    /// Must stay null for leaderboards.
    pub override_storage_mb: Option<u64>,
    /// Must stay null for leaderboards.
    pub override_gpus: Option<u32>,
    /// Harbor field.
    pub override_tpu: Option<serde_json::Value>,
    /// Harbor field.
    pub mounts: Option<serde_json::Value>,
    /// Harbor field.
    pub extra_docker_compose: Vec<serde_json::Value>,
    /// Extra env.
    pub env: BTreeMap<String, String>,
    /// Backend kwargs.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// Harbor field.
    pub extra_allowed_hosts: Vec<String>,
    /// Harbor 0.26's addition, at its default.
    #[serde(flatten)]
    pub harbor_026: EnvironmentConfig026,
}

impl Default for EnvironmentConfig {
    fn default() -> Self {
        Self {
            kind: Some("docker".into()),
            import_path: None,
            force_build: false,
            delete: true,
            cpu_enforcement_policy: "auto".into(),
            memory_enforcement_policy: "auto".into(),
            override_cpus: None,
            override_memory_mb: None,
            override_storage_mb: None,
            override_gpus: None,
            override_tpu: None,
            mounts: None,
            extra_docker_compose: Vec::new(),
            env: BTreeMap::new(),
            kwargs: serde_json::Map::new(),
            extra_allowed_hosts: Vec::new(),
            harbor_026: EnvironmentConfig026::default(),
        }
    }
}

/// Harbor's `VerifierConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VerifierConfig {
    /// Must stay null for leaderboards.
    pub override_timeout_sec: Option<f64>,
    /// Must stay null for leaderboards.
    pub max_timeout_sec: Option<f64>,
    /// Extra verifier env.
    pub env: BTreeMap<String, String>,
    /// Skip verification.
    pub disable: bool,
    /// Run the tests with the programs and startup hooks the agent left (Harbor's behaviour)
    /// instead of the image's own (`runner run --agent-toolchain`; runner-only, absent when
    /// false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent_toolchain: bool,
}

/// `<trial>/config.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TrialConfig {
    /// The task.
    pub task: TaskRef,
    /// `<short-name>__<7 chars>`.
    pub trial_name: String,
    /// The job directory.
    pub trials_dir: String,
    /// Harbor's five timeout multipliers, under their Harbor names.
    #[serde(flatten)]
    pub multipliers: Multipliers,
    /// The agent.
    pub agent: AgentConfig,
    /// The environment.
    pub environment: EnvironmentConfig,
    /// The verifier.
    pub verifier: VerifierConfig,
    /// Extra artifacts.
    pub artifacts: Vec<serde_json::Value>,
    /// Extra instruction files.
    pub extra_instruction_paths: Vec<String>,
    /// The job's id.
    pub job_id: String,
    /// Harbor 0.26's additions, at their defaults.
    #[serde(flatten)]
    pub harbor_026: TrialConfig026,
    /// The limits the trial ran under (runner-only; absent in Harbor's records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<TrialLimits>,
    /// Runner-only: the trial's content-addressed identity, which a resume matches trials by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<TrialIdentity>,
}

/// Runner-only: what makes a trial the trial it is, beside what the config already records
/// (task ref, agent, environment, verifier, multipliers). A resume compares these field by
/// field to name what differs; `key` hashes all of them with the config's fields.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrialIdentity {
    /// `sha256:<hex>` over the task digest, the agent (config, version, source, suffix), the
    /// environment and verifier configs (without `force_build`), the multipliers, the resolved
    /// task env and `index`. The trial name's suffix is taken from it.
    pub key: String,
    /// Which of the task's k trials this is, from 0 (Harbor calls them attempts).
    pub index: u32,
    /// The agent's version as known before setup.
    pub agent_version: String,
    /// `sha256:<hex>` of the installed agent's uploaded source tar (none for built-in agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_source: Option<String>,
    /// `sha256:<hex>` of the text appended to every instruction (none without a suffix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_suffix: Option<String>,
    /// `sha256:<hex>` of the task's resolved `[environment].env` (values may be host secrets,
    /// so only the digest is recorded).
    pub task_env: String,
}
