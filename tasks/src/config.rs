//! `task.toml`: the schema Harbor 0.13.1 reads (schema versions 1.0 to 1.4) and the schema
//! 1.4 fields Harbor 0.26 implements (`[[verifier.collect]]`, an artifact's `service`, MCP
//! `headers`, `[task] version`), parsed the way Harbor's pydantic models parse it. Features the runner cannot run yet are still parsed here,
//! so they are refused by name (see [`crate::unsupported`]) instead of failing as type errors.
//! Semantic checks (ranges, conflicts, network policies, MCP servers) live in
//! [`crate::config_check`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::TaskError;

/// Harbor's default verifier timeout.
pub const DEFAULT_VERIFIER_TIMEOUT_SEC: f64 = 600.0;
/// Harbor's default environment build/start timeout.
pub const DEFAULT_BUILD_TIMEOUT_SEC: f64 = 600.0;

/// The whole of `task.toml`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct TaskConfig {
    /// Schema version; `version` (1.0) is read as its old name.
    #[serde(alias = "version")]
    pub schema_version: Option<String>,
    /// Where the task came from.
    pub source: Option<String>,
    /// Paths in the container collected into `<trial>/artifacts/` after the agent phase.
    pub artifacts: Vec<Artifact>,
    /// How per-step rewards make the trial reward of a multi-step task.
    pub multi_step_reward_strategy: Option<MultiStepRewardStrategy>,
    /// Package identity.
    pub task: Option<TaskSection>,
    /// Free-form metadata.
    pub metadata: toml::Table,
    /// The verifier phase.
    pub verifier: VerifierSection,
    /// The agent phase.
    pub agent: AgentSection,
    /// Oracle solution settings.
    pub solution: SolutionSection,
    /// The container.
    pub environment: EnvironmentSection,
    /// Multi-step tasks: one entry per step, run in order in one environment.
    pub steps: Vec<StepConfig>,
}

/// `[task]`: present only for packaged tasks, and then `name` is required (as in Harbor).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct TaskSection {
    /// `org/name`.
    pub name: String,
    /// The task package's version (schema 1.4, Harbor 0.26): any non-empty string, usually
    /// semantic. Recorded in lock.json's `task.version`, as Harbor records it.
    #[serde(default)]
    pub version: Option<String>,
    /// One-line description.
    #[serde(default)]
    pub description: Option<String>,
    /// Authors.
    #[serde(default)]
    pub authors: Vec<Author>,
    /// Keywords.
    #[serde(default)]
    pub keywords: Vec<String>,
}

/// One `[[task.authors]]` entry.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Author {
    /// The author's name (required).
    pub name: String,
    /// Contact address.
    #[serde(default)]
    pub email: Option<String>,
}

/// A user given by name or numeric id.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum UserSpec {
    /// A user name.
    Name(String),
    /// A numeric uid.
    Id(i64),
}

impl UserSpec {
    /// The form `docker exec --user` takes.
    pub fn as_exec_user(&self) -> String {
        match self {
            UserSpec::Name(name) => name.clone(),
            UserSpec::Id(id) => id.to_string(),
        }
    }
}

/// Where the verifier runs: in the agent's container or in one of its own.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum VerifierEnvironmentMode {
    /// In the agent's container (Harbor's default).
    Shared,
    /// In a dedicated container built from `[verifier.environment]` or `[environment]`.
    Separate,
}

/// `[verifier]` (also `[steps.verifier]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct VerifierSection {
    /// Verifier deadline in seconds.
    pub timeout_sec: f64,
    /// Env for the test script (templates allowed).
    pub env: BTreeMap<String, String>,
    /// User the tests run as.
    pub user: Option<UserSpec>,
    /// Network policy of the verifier phase, when it differs from the environment's.
    pub network_mode: Option<NetworkMode>,
    /// Hosts reachable in the `allowlist` mode (lower-cased, trailing dot removed at load).
    pub allowed_hosts: Option<Vec<String>>,
    /// Shared or separate; unset means separate when `environment` is set, else shared.
    pub environment_mode: Option<VerifierEnvironmentMode>,
    /// The separate verifier's container (`[verifier.environment]`).
    pub environment: Option<Box<EnvironmentSection>>,
    /// `[[verifier.collect]]` hooks (schema 1.4): commands run in compose services after the
    /// agent phase, before artifacts are collected.
    pub collect: Vec<crate::collect::CollectHook>,
}

impl Default for VerifierSection {
    fn default() -> Self {
        Self {
            timeout_sec: DEFAULT_VERIFIER_TIMEOUT_SEC,
            env: BTreeMap::new(),
            user: None,
            network_mode: None,
            allowed_hosts: None,
            environment_mode: None,
            environment: None,
            collect: Vec::new(),
        }
    }
}

impl VerifierSection {
    /// The mode this section declares, before inheritance (Harbor's `_resolve_mode`): explicit,
    /// else separate when `[verifier.environment]` is set, else `None`.
    pub fn declared_mode(&self) -> Option<VerifierEnvironmentMode> {
        self.environment_mode.or(self
            .environment
            .as_ref()
            .map(|_| VerifierEnvironmentMode::Separate))
    }
}

/// `[agent]` (also `[steps.agent]`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct AgentSection {
    /// Agent deadline in seconds; `None` means no deadline (Harbor 0.13 semantics).
    pub timeout_sec: Option<f64>,
    /// User the agent runs as.
    pub user: Option<UserSpec>,
    /// Network policy of the agent phase, when it differs from the environment's.
    pub network_mode: Option<NetworkMode>,
    /// Hosts reachable in the `allowlist` mode (lower-cased, trailing dot removed at load).
    pub allowed_hosts: Option<Vec<String>>,
}

/// `[solution]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct SolutionSection {
    /// Env for `solve.sh`.
    pub env: BTreeMap<String, String>,
}

/// `[environment.healthcheck]` (also `[steps.healthcheck]`), with Docker HEALTHCHECK
/// semantics. `command` is required, as in Harbor.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Healthcheck {
    /// The command; a zero exit means healthy.
    pub command: String,
    /// Seconds between attempts after the start period.
    #[serde(default = "Healthcheck::default_interval")]
    pub interval_sec: f64,
    /// Deadline of one attempt.
    #[serde(default = "Healthcheck::default_timeout")]
    pub timeout_sec: f64,
    /// Failures during this period do not count.
    #[serde(default)]
    pub start_period_sec: f64,
    /// Seconds between attempts during the start period.
    #[serde(default = "Healthcheck::default_interval")]
    pub start_interval_sec: f64,
    /// Consecutive failures after which the container is unhealthy.
    #[serde(default = "Healthcheck::default_retries")]
    pub retries: u32,
}

impl Healthcheck {
    fn default_interval() -> f64 {
        5.0
    }
    fn default_timeout() -> f64 {
        30.0
    }
    fn default_retries() -> u32 {
        3
    }

    /// The longest the check can take before it fails for good, in seconds: the start period
    /// (plus one attempt and pause that may straddle its end), then `retries` failed attempts
    /// with their pauses. Checked against [`crate::limits::MAX_TIMEOUT_SEC`] at load.
    pub fn worst_case_sec(&self) -> f64 {
        self.start_period_sec
            + self.timeout_sec
            + self.start_interval_sec
            + f64::from(self.retries.max(1)) * (self.timeout_sec + self.interval_sec)
    }
}

impl Default for Healthcheck {
    fn default() -> Self {
        Self {
            command: String::new(),
            interval_sec: Self::default_interval(),
            timeout_sec: Self::default_timeout(),
            start_period_sec: 0.0,
            start_interval_sec: Self::default_interval(),
            retries: Self::default_retries(),
        }
    }
}

/// Whether a phase may reach the network. Values are exact lower-case strings, as in Harbor.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Normal networking.
    Public,
    /// Loopback only.
    NoNetwork,
    /// Only `allowed_hosts` (parsed; refused as not supported yet).
    Allowlist,
}

impl NetworkMode {
    /// The `task.toml` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Public => "public",
            NetworkMode::NoNetwork => "no-network",
            NetworkMode::Allowlist => "allowlist",
        }
    }
}

/// The operating system of the task's container; read case-insensitively, as Harbor does.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TaskOs {
    /// Linux containers (the default).
    #[default]
    Linux,
    /// Windows containers (parsed; refused on this backend).
    Windows,
}

impl<'de> Deserialize<'de> for TaskOs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_lowercase().as_str() {
            "linux" => Ok(TaskOs::Linux),
            "windows" => Ok(TaskOs::Windows),
            _ => Err(serde::de::Error::custom(format!(
                "{text:?} is not a task os; use \"linux\" or \"windows\""
            ))),
        }
    }
}

/// How an MCP server is reached.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
pub enum McpTransport {
    /// A command the agent starts, talking over stdin/stdout.
    #[serde(rename = "stdio")]
    Stdio,
    /// Server-sent events at `url` (Harbor's default).
    #[default]
    #[serde(rename = "sse")]
    Sse,
    /// Streamable HTTP at `url`; `"http"` is accepted as its alias, as in Harbor.
    #[serde(rename = "streamable-http", alias = "http")]
    StreamableHttp,
}

/// One `[[environment.mcp_servers]]` entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct McpServer {
    /// The server's name as agents see it.
    pub name: String,
    /// How it is reached.
    #[serde(default)]
    pub transport: McpTransport,
    /// Required for `sse` and `streamable-http`.
    #[serde(default)]
    pub url: Option<String>,
    /// Required for `stdio`.
    #[serde(default)]
    pub command: Option<String>,
    /// Arguments of `command`.
    #[serde(default)]
    pub args: Vec<String>,
    /// HTTP headers sent to an `sse`/`streamable-http` server (schema 1.4); values may hold
    /// `${VAR}` templates, which credential headers must use (see [`crate::mcp_headers`]).
    /// Left out of the JSON when empty, as Harbor leaves it out of its dumps.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// `[environment.tpu]`: a TPU slice (parsed; refused on this backend).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct TpuSpec {
    /// Accelerator type, e.g. `"v6e"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `NxM` or `NxMxK`, e.g. `"2x4"`.
    pub topology: String,
}

/// `[environment]` (also `[verifier.environment]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct EnvironmentSection {
    /// Build/start deadline in seconds.
    pub build_timeout_sec: f64,
    /// A prebuilt image, used when there is no Dockerfile.
    pub docker_image: Option<String>,
    /// `linux` (default) or `windows`, any case.
    pub os: Option<TaskOs>,
    /// CPU limit.
    pub cpus: Option<f64>,
    /// Memory limit in MB (filled from the legacy `memory` at load).
    pub memory_mb: Option<u64>,
    /// Legacy memory limit such as `"2G"`.
    pub memory: Option<String>,
    /// Storage limit in MB (filled from the legacy `storage` at load).
    pub storage_mb: Option<u64>,
    /// Legacy storage limit such as `"10G"`.
    pub storage: Option<String>,
    /// GPUs requested (more than 0 is refused on this backend).
    pub gpus: Option<u32>,
    /// GPU types accepted.
    pub gpu_types: Vec<String>,
    /// A TPU slice.
    pub tpu: Option<TpuSpec>,
    /// Network policy; unset means the deprecated `allow_internet`, else public.
    pub network_mode: Option<NetworkMode>,
    /// Deprecated: false means no network, when neither `network_mode` nor `allowed_hosts` is set.
    pub allow_internet: Option<bool>,
    /// Hosts for the allowlist mode (lower-cased, trailing dot removed at load).
    pub allowed_hosts: Option<Vec<String>>,
    /// Default working directory of commands.
    pub workdir: Option<String>,
    /// Env for every command (templates allowed).
    pub env: BTreeMap<String, String>,
    /// Run after start, before agent setup.
    pub healthcheck: Option<Healthcheck>,
    /// MCP servers offered to agents (passed to installed agents).
    pub mcp_servers: Vec<McpServer>,
    /// Skills directory in the container, whose contents agents copy into their own skills
    /// location (passed to installed agents).
    pub skills_dir: Option<String>,
}

impl Default for EnvironmentSection {
    fn default() -> Self {
        Self {
            build_timeout_sec: DEFAULT_BUILD_TIMEOUT_SEC,
            docker_image: None,
            os: None,
            cpus: None,
            memory_mb: None,
            memory: None,
            storage_mb: None,
            storage: None,
            gpus: None,
            gpu_types: Vec::new(),
            tpu: None,
            network_mode: None,
            allow_internet: None,
            allowed_hosts: None,
            workdir: None,
            env: BTreeMap::new(),
            healthcheck: None,
            mcp_servers: Vec::new(),
            skills_dir: None,
        }
    }
}

impl EnvironmentSection {
    /// The effective network mode (Harbor's baseline): `network_mode`, else the deprecated
    /// `allow_internet` unless `allowed_hosts` is set, else public.
    pub fn effective_network(&self) -> NetworkMode {
        match (self.network_mode, self.allow_internet) {
            (Some(mode), _) => mode,
            (None, Some(false)) if self.allowed_hosts.is_none() => NetworkMode::NoNetwork,
            _ => NetworkMode::Public,
        }
    }

    /// The operating system, linux when unset.
    pub fn target_os(&self) -> TaskOs {
        self.os.unwrap_or_default()
    }

    /// The memory limit in MB from `memory_mb` or the legacy `memory` string.
    pub fn effective_memory_mb(&self) -> Option<u64> {
        self.memory_mb
            .or_else(|| self.memory.as_deref().and_then(parse_size_mb))
    }

    /// The storage limit in MB from `storage_mb` or the legacy `storage` string.
    pub fn effective_storage_mb(&self) -> Option<u64> {
        self.storage_mb
            .or_else(|| self.storage.as_deref().and_then(parse_size_mb))
    }
}

/// A step's reward gate: a threshold on `reward`, or one per reward key.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum MinReward {
    /// The step's `reward` must be at least this.
    Threshold(f64),
    /// Each named reward must be at least its value.
    PerKey(BTreeMap<String, f64>),
}

/// An artifact to collect: a path, or a table with a source and options.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Artifact {
    /// A path in the container.
    Path(String),
    /// `{ source, destination?, exclude?, service? }`.
    Spec {
        /// Path in the container.
        source: String,
        /// Where it goes under the trial's artifacts dir.
        #[serde(default)]
        destination: Option<String>,
        /// tar `--exclude` patterns for directory artifacts.
        #[serde(default)]
        exclude: Vec<String>,
        /// The compose service it is collected from (schema 1.4); `None` or `main` is the
        /// agent's container, any other needs an absolute `source`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<String>,
    },
}

/// One `[[steps]]` entry of a multi-step task.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct StepConfig {
    /// The step's name; its files are under `steps/<name>/`.
    pub name: String,
    /// The step's agent phase.
    #[serde(default)]
    pub agent: AgentSection,
    /// The step's verifier phase.
    #[serde(default)]
    pub verifier: VerifierSection,
    /// Gate: later steps are skipped when this step's rewards fall short.
    #[serde(default)]
    pub min_reward: Option<MinReward>,
    /// A healthcheck run after the step's setup.
    #[serde(default)]
    pub healthcheck: Option<Healthcheck>,
    /// Artifacts collected after the step.
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
}

/// Trial reward of a multi-step task from its steps' rewards.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MultiStepRewardStrategy {
    /// Per-key mean over steps.
    Mean,
    /// The last step's rewards.
    Final,
}

/// Parses a legacy size into MB exactly as Harbor does: a number with a `G`, `M` or `K` suffix
/// (any case), truncated to whole MB. `None` for anything else, including negative and
/// non-finite numbers.
pub fn parse_size_mb(text: &str) -> Option<u64> {
    let upper = text.trim().to_ascii_uppercase();
    let (number, factor) = if let Some(n) = upper.strip_suffix('G') {
        (n, 1024.0)
    } else if let Some(n) = upper.strip_suffix('M') {
        (n, 1.0)
    } else if let Some(n) = upper.strip_suffix('K') {
        (n, 1.0 / 1024.0)
    } else {
        return None;
    };
    let value: f64 = number.trim().parse().ok()?;
    let mb = (value * factor).trunc();
    // `as` saturates; the range check at load refuses anything that large anyway.
    (mb.is_finite() && mb >= 0.0).then_some(mb as u64)
}

/// A parsed `task.toml` and the warnings about keys it does not know.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    /// The configuration.
    pub config: TaskConfig,
    /// `path: key is not a known task.toml key` lines.
    pub warnings: Vec<String>,
}

/// Parses `task.toml` text and checks it as Harbor does plus the runner's ranges; unknown keys
/// become warnings, and every error names the file and the field.
pub fn parse_task_config(path: &Path, text: &str) -> Result<ParsedConfig, TaskError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        TaskError::invalid(path, "(syntax)", e.to_string().trim().replace('\n', " "))
    })?;
    let mut unknown = Vec::new();
    let mut config: TaskConfig = {
        let mut record_unknown = |key: serde_ignored::Path<'_>| unknown.push(key.to_string());
        let tracked = serde_ignored::Deserializer::new(deserializer, &mut record_unknown);
        serde_path_to_error::deserialize(tracked).map_err(|e| {
            let field = e.path().to_string();
            TaskError::invalid(path, field, e.into_inner().message().trim().to_owned())
        })?
    };
    let warnings = unknown
        .into_iter()
        .map(|key| {
            format!(
                "{}: `{key}` is not a known task.toml key; it is ignored",
                path.display()
            )
        })
        .collect();
    crate::config_check::check(path, &mut config)?;
    Ok(ParsedConfig { config, warnings })
}

#[cfg(test)]
mod tests;
