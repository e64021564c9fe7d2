//! `task.toml`: the schema Harbor reads (schema versions 1.0 to 1.4).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

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
    /// Extra paths collected after the run.
    pub artifacts: Vec<toml::Value>,
    /// Multi-step reward strategy (read, not used: multi-step tasks are not run yet).
    pub multi_step_reward_strategy: Option<String>,
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
    /// Multi-step tasks (read, not run).
    pub steps: Vec<toml::Value>,
}

/// `[task]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct TaskSection {
    /// `org/name`.
    pub name: Option<String>,
    /// One-line description.
    pub description: Option<String>,
    /// Authors.
    pub authors: Vec<toml::Value>,
    /// Keywords.
    pub keywords: Vec<String>,
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

/// `[verifier]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct VerifierSection {
    /// Verifier deadline in seconds.
    pub timeout_sec: f64,
    /// Env for the test script (templates allowed).
    pub env: BTreeMap<String, String>,
    /// User the tests run as.
    pub user: Option<UserSpec>,
}

impl Default for VerifierSection {
    fn default() -> Self {
        Self {
            timeout_sec: DEFAULT_VERIFIER_TIMEOUT_SEC,
            env: BTreeMap::new(),
            user: None,
        }
    }
}

/// `[agent]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct AgentSection {
    /// Agent deadline in seconds; `None` means no deadline (Harbor 0.13 semantics).
    pub timeout_sec: Option<f64>,
    /// User the agent runs as.
    pub user: Option<UserSpec>,
}

/// `[solution]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct SolutionSection {
    /// Env for `solve.sh`.
    pub env: BTreeMap<String, String>,
}

/// `[environment.healthcheck]`, with Docker HEALTHCHECK semantics.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct Healthcheck {
    /// The command; a zero exit means healthy.
    pub command: String,
    /// Seconds between attempts after the start period.
    pub interval_sec: f64,
    /// Deadline of one attempt.
    pub timeout_sec: f64,
    /// Failures during this period do not count.
    pub start_period_sec: f64,
    /// Seconds between attempts during the start period.
    pub start_interval_sec: f64,
    /// Consecutive failures after which the container is unhealthy.
    pub retries: u32,
}

impl Default for Healthcheck {
    fn default() -> Self {
        Self {
            command: String::new(),
            interval_sec: 5.0,
            timeout_sec: 30.0,
            start_period_sec: 0.0,
            start_interval_sec: 5.0,
            retries: 3,
        }
    }
}

/// Whether the task container may reach the network.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Normal networking.
    Public,
    /// Loopback only.
    NoNetwork,
    /// Only `allowed_hosts` (not supported by the Docker backend, as in Harbor).
    Allowlist,
}

/// `[environment]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct EnvironmentSection {
    /// Build/start deadline in seconds.
    pub build_timeout_sec: f64,
    /// A prebuilt image, used when there is no Dockerfile.
    pub docker_image: Option<String>,
    /// `linux` or `windows`.
    pub os: Option<String>,
    /// CPU limit.
    pub cpus: Option<f64>,
    /// Memory limit in MB.
    pub memory_mb: Option<u64>,
    /// Legacy memory limit such as `"2G"`.
    pub memory: Option<String>,
    /// Storage limit in MB (recorded; the Docker backend does not enforce it).
    pub storage_mb: Option<u64>,
    /// Legacy storage limit such as `"10G"`.
    pub storage: Option<String>,
    /// GPUs requested.
    pub gpus: Option<u32>,
    /// GPU types accepted.
    pub gpu_types: Vec<String>,
    /// Network policy.
    pub network_mode: Option<NetworkMode>,
    /// Deprecated: false means no network, when `network_mode` is unset.
    pub allow_internet: Option<bool>,
    /// Hosts for the allowlist mode.
    pub allowed_hosts: Vec<String>,
    /// Default working directory of commands.
    pub workdir: Option<String>,
    /// Env for every command (templates allowed).
    pub env: BTreeMap<String, String>,
    /// Run after start, before agent setup.
    pub healthcheck: Option<Healthcheck>,
    /// MCP servers offered to agents (recorded).
    pub mcp_servers: Vec<toml::Value>,
    /// Skills directory (recorded).
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
            network_mode: None,
            allow_internet: None,
            allowed_hosts: Vec::new(),
            workdir: None,
            env: BTreeMap::new(),
            healthcheck: None,
            mcp_servers: Vec::new(),
            skills_dir: None,
        }
    }
}

impl EnvironmentSection {
    /// The effective network mode: `network_mode`, else the deprecated `allow_internet`, else public.
    pub fn effective_network(&self) -> NetworkMode {
        match (self.network_mode, self.allow_internet) {
            (Some(mode), _) => mode,
            (None, Some(false)) => NetworkMode::NoNetwork,
            _ => NetworkMode::Public,
        }
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

/// Parses a legacy size (`"2G"`, `"512M"`, `"1048576K"`) into MB as Harbor does.
pub fn parse_size_mb(text: &str) -> Option<u64> {
    let text = text.trim();
    let upper = text.to_ascii_uppercase();
    let (number, factor): (&str, f64) = if let Some(n) = upper.strip_suffix('G') {
        (n, 1024.0)
    } else if let Some(n) = upper.strip_suffix('M') {
        (n, 1.0)
    } else if let Some(n) = upper.strip_suffix('K') {
        (n, 1.0 / 1024.0)
    } else {
        (upper.as_str(), 1.0)
    };
    let value: f64 = number.trim().parse().ok()?;
    (value >= 0.0).then_some((value * factor) as u64)
}

/// A parsed `task.toml` and the warnings about keys it does not know.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    /// The configuration.
    pub config: TaskConfig,
    /// `path: key is not a known task.toml key` lines.
    pub warnings: Vec<String>,
}

/// Parses `task.toml` text; unknown keys become warnings, type errors name the field.
pub fn parse_task_config(path: &Path, text: &str) -> Result<ParsedConfig, TaskError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        TaskError::invalid(path, "(syntax)", e.to_string().trim().replace('\n', " "))
    })?;
    let mut unknown = Vec::new();
    let config: TaskConfig = {
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
    validate(path, &config)?;
    Ok(ParsedConfig { config, warnings })
}

fn validate(path: &Path, config: &TaskConfig) -> Result<(), TaskError> {
    if let Some(name) = config.task.as_ref().and_then(|t| t.name.as_deref()) {
        let valid = name.split('/').count() == 2
            && !name.contains("..")
            && name.split('/').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            });
        if !valid {
            return Err(TaskError::invalid(
                path,
                "task.name",
                format!("{name:?} must be \"org/name\" (letters, digits, . _ -)"),
            ));
        }
    }
    let env = &config.environment;
    if let Some(memory) = &env.memory
        && env.memory_mb.is_none()
        && parse_size_mb(memory).is_none()
    {
        return Err(TaskError::invalid(
            path,
            "environment.memory",
            format!("{memory:?} is not a size like \"2G\" or \"512M\""),
        ));
    }
    for (field, value) in [
        ("verifier.timeout_sec", Some(config.verifier.timeout_sec)),
        ("agent.timeout_sec", config.agent.timeout_sec),
        ("environment.build_timeout_sec", Some(env.build_timeout_sec)),
        ("environment.cpus", env.cpus),
    ] {
        if let Some(v) = value
            && !(v.is_finite() && v > 0.0)
        {
            return Err(TaskError::invalid(
                path,
                field,
                format!("{v} must be a positive number"),
            ));
        }
    }
    if env.effective_network() == NetworkMode::Allowlist {
        return Err(TaskError::invalid(
            path,
            "environment.network_mode",
            "\"allowlist\" is not supported by the Docker backend (as in Harbor); use \"public\" or \"no-network\"",
        ));
    }
    if env.os.as_deref().is_some_and(|os| os != "linux") {
        return Err(TaskError::invalid(
            path,
            "environment.os",
            "only \"linux\" tasks can run on this backend",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ParsedConfig, TaskError> {
        parse_task_config(Path::new("t/task.toml"), text)
    }

    #[test]
    fn defaults_follow_harbor() {
        let parsed = parse("").unwrap();
        assert_eq!(parsed.config.verifier.timeout_sec, 600.0);
        assert_eq!(parsed.config.agent.timeout_sec, None);
        assert_eq!(parsed.config.environment.build_timeout_sec, 600.0);
        assert_eq!(
            parsed.config.environment.effective_network(),
            NetworkMode::Public
        );
    }

    #[test]
    fn reads_a_terminal_bench_task() {
        let parsed = parse(
            r#"
schema_version = "1.1"
artifacts = []
[task]
name = "terminal-bench/regex-log"
keywords = ["regex"]
[[task.authors]]
name = "A"
[metadata]
difficulty = "medium"
[verifier]
timeout_sec = 900.0
user = 1000
[agent]
timeout_sec = 1200.0
user = "agent"
[environment]
docker_image = "img:1"
workdir = "/app"
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
allow_internet = false
mcp_servers = []
[environment.env]
PATH = "/app/.venv/bin:/usr/bin"
[environment.healthcheck]
command = "true"
retries = 5
"#,
        )
        .unwrap();
        let c = parsed.config;
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        assert_eq!(c.schema_version.as_deref(), Some("1.1"));
        assert_eq!(c.verifier.user, Some(UserSpec::Id(1000)));
        assert_eq!(c.agent.user.unwrap().as_exec_user(), "agent");
        assert_eq!(c.agent.timeout_sec, Some(1200.0));
        assert_eq!(c.environment.cpus, Some(1.0));
        assert_eq!(c.environment.effective_network(), NetworkMode::NoNetwork);
        assert_eq!(c.environment.healthcheck.unwrap().retries, 5);
    }

    #[test]
    fn version_is_the_old_name_of_schema_version() {
        assert_eq!(
            parse("version = \"1.0\"")
                .unwrap()
                .config
                .schema_version
                .as_deref(),
            Some("1.0")
        );
    }

    #[test]
    fn network_mode_wins_over_allow_internet() {
        let c = parse("[environment]\nnetwork_mode = \"public\"\nallow_internet = false")
            .unwrap()
            .config;
        assert_eq!(c.environment.effective_network(), NetworkMode::Public);
        let c = parse("[environment]\nnetwork_mode = \"no-network\"")
            .unwrap()
            .config;
        assert_eq!(c.environment.effective_network(), NetworkMode::NoNetwork);
    }

    #[test]
    fn legacy_sizes_convert_to_mb() {
        assert_eq!(parse_size_mb("2G"), Some(2048));
        assert_eq!(parse_size_mb("512M"), Some(512));
        assert_eq!(parse_size_mb("1048576K"), Some(1024));
        assert_eq!(parse_size_mb("lots"), None);
        let c = parse("[environment]\nmemory = \"4G\"\nstorage = \"10G\"")
            .unwrap()
            .config;
        assert_eq!(c.environment.effective_memory_mb(), Some(4096));
        assert_eq!(c.environment.effective_storage_mb(), Some(10240));
    }

    #[test]
    fn unknown_keys_warn_and_never_fail() {
        let parsed = parse("colour = 1\n[environment]\nflavour = \"x\"").unwrap();
        assert_eq!(parsed.warnings.len(), 2);
        assert!(
            parsed
                .warnings
                .iter()
                .any(|w| w.contains("environment.flavour")),
            "{:?}",
            parsed.warnings
        );
    }

    #[test]
    fn errors_name_file_and_field() {
        let err = parse("[verifier]\ntimeout_sec = \"soon\"")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t/task.toml"), "{err}");
        assert!(err.contains("verifier.timeout_sec"), "{err}");
        let err = parse("[agent]\ntimeout_sec = -1.0")
            .unwrap_err()
            .to_string();
        assert!(err.contains("agent.timeout_sec"), "{err}");
        let err = parse("[environment]\nmemory = \"lots\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("environment.memory"), "{err}");
        let err = parse("[task]\nname = \"no-org\"").unwrap_err().to_string();
        assert!(err.contains("task.name"), "{err}");
        let err = parse("[environment\n").unwrap_err().to_string();
        assert!(err.contains("(syntax)"), "{err}");
    }
}
