//! The installed-agent config file (TOML), passed as `runner run --agent-config FILE`.
//!
//! Unknown keys are errors (a typo in a key would otherwise silently change what runs), and
//! every error names the file and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A config that cannot be used; names the file and the key and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum AgentConfigError {
    /// The file could not be read.
    #[error("agent config {file}: cannot read it: {source}")]
    Read {
        /// The config file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A key is missing, unknown or has the wrong type or value.
    #[error("agent config {file}: `{key}`: {message}")]
    Invalid {
        /// The config file.
        file: PathBuf,
        /// The key path, e.g. `server.port`.
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// Packaging the source failed (secret found, dirty tree refused, unreadable file).
    #[error("agent config {file}: `source.dir`: {source}")]
    Source {
        /// The config file.
        file: PathBuf,
        /// The packaging error.
        source: provenance::ProvenanceError,
    },
    /// The env bound for the container holds a credential and the opt-in was not given.
    #[error("agent config {file}: {source}")]
    Secret {
        /// The config file.
        file: PathBuf,
        /// The boundary error (names the variable, never the value).
        source: crate::secrets::SecretBoundaryError,
    },
}

crate::file_agent::agent_config_struct! {
/// The whole config file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InstalledAgentConfig {
    /// Where the source is and where it goes.
    pub source: SourceSection,
    /// Install commands.
    #[serde(default)]
    pub install: InstallSection,
    /// The in-container server.
    pub server: ServerSection,
    /// The task API.
    #[serde(default)]
    pub api: ApiSection,
    /// Env for the container (install commands, server, version command).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Trace files collected after the run.
    #[serde(default)]
    pub traces: TracesSection,
    /// How `agent/trajectory.json` is produced.
    #[serde(default)]
    pub trajectory: TrajectorySection,
    /// Workspace root override; by default the task workdir, `/app`, `/workspace`, or a new `/app`.
    #[serde(default)]
    pub workspace_root: Option<String>,
    /// Where the task's skills go (see [`super::task_extras`]).
    #[serde(default)]
    pub skills: super::task_extras::SkillsSection,
    /// Where the task's MCP servers are written (see [`super::task_extras`]).
    #[serde(default)]
    pub mcp: super::task_extras::McpSection,
    /// The directory the config was loaded from; relative paths resolve against it.
    #[serde(skip)]
    pub config_dir: PathBuf,
    /// The config file itself, for error messages.
    #[serde(skip)]
    pub config_file: PathBuf,
}
}

/// `[source]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SourceSection {
    /// The agent's source directory, relative to the config file.
    pub dir: PathBuf,
    /// Globs excluded on top of the defaults.
    #[serde(default)]
    pub excludes: Vec<String>,
    /// Where the source is unpacked in the container (default `/opt/<name>-src`).
    #[serde(default)]
    pub install_path: Option<String>,
}

/// `[install]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InstallSection {
    /// Commands run as root, in order, in the source dir; any failure fails setup.
    #[serde(default)]
    pub commands: Vec<String>,
}

/// `[server]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// The start command (placeholders `{source_dir}`, `{port}`, `{workspace_root}`).
    pub command: String,
    /// The port it listens on inside the container (on 127.0.0.1).
    pub port: u16,
    /// GET this path until it answers 2xx.
    #[serde(default = "default_health_path")]
    pub health_path: String,
    /// Run the server as this user instead of the task's agent user.
    #[serde(default)]
    pub user: Option<String>,
    /// Stop the server after the run instead of keeping it up through verification.
    #[serde(default)]
    pub stop_after_run: bool,
}

fn default_health_path() -> String {
    "/health".into()
}

/// `[api]`: the task API paths and statuses.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSection {
    /// POST the task here.
    pub submit_path: String,
    /// GET the task's state here (`{id}` is replaced).
    pub status_path: String,
    /// POST here to cancel (`{id}` is replaced).
    pub cancel_path: String,
    /// The submit response's id field.
    pub id_field: String,
    /// The status response's status field.
    pub status_field: String,
    /// Statuses that end polling.
    pub final_statuses: Vec<String>,
    /// Final statuses that mean the agent finished its work (others are recorded as failures).
    pub success_statuses: Vec<String>,
    /// First poll interval, seconds.
    pub poll_interval_sec: f64,
    /// The poll interval grows to at most this, seconds.
    pub poll_max_interval_sec: f64,
    /// After cancel, wait this long for a final status (so the trace is complete).
    pub cancel_grace_sec: f64,
}

impl Default for ApiSection {
    fn default() -> Self {
        Self {
            submit_path: "/api/tasks".into(),
            status_path: "/api/tasks/{id}".into(),
            cancel_path: "/api/tasks/{id}/cancel".into(),
            id_field: "id".into(),
            status_field: "status".into(),
            final_statuses: [
                "completed",
                "succeeded",
                "failed",
                "error",
                "cancelled",
                "canceled",
                "timed_out",
            ]
            .map(String::from)
            .to_vec(),
            success_statuses: ["completed", "succeeded"].map(String::from).to_vec(),
            poll_interval_sec: 0.25,
            poll_max_interval_sec: 5.0,
            cancel_grace_sec: 10.0,
        }
    }
}

/// `[traces]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TracesSection {
    /// Container paths (files or directories; `{task_id}` is replaced) copied to `agent/traces/`.
    #[serde(default)]
    pub files: Vec<String>,
}

/// How the trajectory is made.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TrajectoryFormat {
    /// The runner's JSONL event log (see the reference agent's README), converted to ATIF.
    #[default]
    Events,
    /// The agent writes ATIF itself; it is validated and copied.
    Atif,
    /// No trajectory.
    None,
}

/// `[trajectory]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrajectorySection {
    /// The format of `file`.
    #[serde(default)]
    pub format: TrajectoryFormat,
    /// The trace file (name under `agent/traces/`) to convert.
    #[serde(default)]
    pub file: Option<String>,
}

impl InstalledAgentConfig {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Self, AgentConfigError> {
        Self::parse(path, &read_config(path)?)
    }

    /// Parses config text; `path` is used for messages and to resolve `source.dir`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, AgentConfigError> {
        let mut config: InstalledAgentConfig = deserialize_toml(path, text)?;
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        config.config_dir = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
        config.config_file = absolute;
        config
            .check()
            .map_err(|(key, message)| AgentConfigError::Invalid {
                file: path.into(),
                key: key.into(),
                message,
            })?;
        Ok(config)
    }

    fn check(&self) -> Result<(), (&'static str, String)> {
        check_identity(
            &self.name,
            (&self.version, &self.version_command),
            (&self.model_name, &self.models),
        )?;
        if self.server.port == 0 {
            return Err((
                "server.port",
                "must be a fixed port between 1 and 65535".into(),
            ));
        }
        for (key, path) in [
            ("server.health_path", &self.server.health_path),
            ("api.submit_path", &self.api.submit_path),
            ("api.status_path", &self.api.status_path),
            ("api.cancel_path", &self.api.cancel_path),
        ] {
            if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err((
                    key,
                    format!(
                        "`{path}` must be an absolute URL path starting with '/' without spaces"
                    ),
                ));
            }
        }
        for (key, path) in [
            ("api.status_path", &self.api.status_path),
            ("api.cancel_path", &self.api.cancel_path),
        ] {
            if !path.contains("{id}") {
                return Err((
                    key,
                    format!("`{path}` must contain `{{id}}` where the task id goes"),
                ));
            }
        }
        if let Some(path) = &self.source.install_path
            && !path.starts_with('/')
        {
            return Err((
                "source.install_path",
                format!("`{path}` must be an absolute container path"),
            ));
        }
        if let Some(path) = &self.workspace_root
            && !path.starts_with('/')
        {
            return Err((
                "workspace_root",
                format!("`{path}` must be an absolute container path"),
            ));
        }
        if self.api.final_statuses.is_empty() {
            return Err(("api.final_statuses", "must list at least one status".into()));
        }
        if let Some(status) = self
            .api
            .success_statuses
            .iter()
            .find(|s| !self.api.final_statuses.contains(s))
        {
            return Err((
                "api.success_statuses",
                format!("`{status}` is not in api.final_statuses"),
            ));
        }
        if !(self.api.poll_interval_sec > 0.0
            && self.api.poll_max_interval_sec >= self.api.poll_interval_sec)
        {
            return Err((
                "api.poll_interval_sec",
                "must be > 0 and not above api.poll_max_interval_sec".into(),
            ));
        }
        if self.api.cancel_grace_sec.is_nan() || self.api.cancel_grace_sec < 0.0 {
            return Err(("api.cancel_grace_sec", "must be >= 0".into()));
        }
        for name in self.env.keys() {
            if !is_env_name(name) {
                return Err((
                    "env",
                    format!("`{name}` is not a valid environment variable name"),
                ));
            }
        }
        if self.trajectory.format != TrajectoryFormat::None && self.trajectory.file.is_none() {
            return Err((
                "trajectory.file",
                "name the trace file to convert, or set trajectory.format = \"none\"".into(),
            ));
        }
        if let Some(file) = &self.trajectory.file
            && (file.contains('/') || file.is_empty())
        {
            return Err((
                "trajectory.file",
                format!("`{file}` must be a file name under agent/traces/, without '/'"),
            ));
        }
        Ok(())
    }

    /// The source directory on the host.
    pub fn source_dir(&self) -> PathBuf {
        self.config_dir.join(&self.source.dir)
    }

    /// Where the source is unpacked in the container.
    pub fn install_path(&self) -> String {
        self.source
            .install_path
            .clone()
            .unwrap_or_else(|| format!("/opt/{}-src", self.name))
    }
}

/// Deserializes a whole agent config file; errors name `path` and the key path
/// (`server.port`), or `(syntax)` for TOML that does not parse.
pub(crate) fn deserialize_toml<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<T, AgentConfigError> {
    let invalid = |key: String, message: String| AgentConfigError::Invalid {
        file: path.into(),
        key,
        message,
    };
    let deserializer = toml::Deserializer::parse(text)
        .map_err(|e| invalid("(syntax)".into(), e.to_string().trim().replace('\n', " ")))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e.path().to_string();
        invalid(key, e.into_inner().message().trim().to_owned())
    })
}

/// An agent config file's text.
pub(crate) fn read_config(path: &Path) -> Result<String, AgentConfigError> {
    std::fs::read_to_string(path).map_err(|source| AgentConfigError::Read {
        file: path.into(),
        source,
    })
}

/// The checks every agent config shares: a name usable in paths and records, at most one way
/// of learning the version (`version`, `version_command`), and declared models
/// (`model_name`, `models`) of the form `provider/model`, the default among the list.
pub(crate) fn check_identity(
    name: &str,
    (version, version_command): (&Option<String>, &Option<String>),
    (model_name, models): (&Option<String>, &[String]),
) -> Result<(), (&'static str, String)> {
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err((
            "name",
            "must be non-empty and use only letters, digits, '-', '_' and '.'".into(),
        ));
    }
    if version.is_some() && version_command.is_some() {
        return Err((
            "version_command",
            "give either `version` or `version_command`, not both".into(),
        ));
    }
    for (i, model) in models.iter().enumerate() {
        if model.trim().is_empty() || model.chars().any(char::is_whitespace) {
            return Err((
                "models",
                format!("{model:?} is not a model name; write provider/model"),
            ));
        }
        if models[..i].contains(model) {
            return Err(("models", format!("{model:?} is listed twice")));
        }
    }
    if let Some(model) = model_name
        .as_ref()
        .filter(|m| !models.is_empty() && !models.contains(m))
    {
        return Err((
            "model_name",
            format!(
                "{model:?} is not among `models` ({}); the default model must be one the agent may call",
                models.join(", ")
            ),
        ));
    }
    Ok(())
}

/// True for a POSIX-style environment variable name.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_agent::test_configs::{INSTALLED as MINIMAL, PATH, error_of};

    #[test]
    fn minimal_config_gets_defaults() {
        let config = InstalledAgentConfig::parse(Path::new(PATH), MINIMAL).unwrap();
        assert_eq!(config.install_path(), "/opt/my-agent-src");
        assert_eq!(config.source_dir(), PathBuf::from("/cfg/src"));
        assert_eq!(config.api.submit_path, "/api/tasks");
        assert_eq!(config.server.health_path, "/health");
        assert!(config.api.final_statuses.contains(&"cancelled".to_owned()));
    }

    #[test]
    fn errors_name_file_and_key() {
        let err = error_of(&MINIMAL.replace("port = 8765", "port = \"x\""));
        assert!(
            err.contains("/cfg/agent.toml") && err.contains("`server.port`"),
            "{err}"
        );
        let err = error_of(&MINIMAL.replace("[server]", "[server]\nhealth = \"/h\""));
        assert!(
            err.contains("`server.health`") || err.contains("health"),
            "{err}"
        );
        assert!(err.contains("/cfg/agent.toml"), "{err}");
        let err = error_of(&MINIMAL.replace("name = \"my-agent\"\n", ""));
        assert!(err.contains("name"), "{err}");
        let err = error_of(&format!("{MINIMAL}\n[api]\nstatus_path = \"/api/tasks\"\n"));
        assert!(
            err.contains("`api.status_path`") && err.contains("{id}"),
            "{err}"
        );
        let err = error_of(&format!("{MINIMAL}\n[env]\n\"BAD NAME\" = \"x\"\n"));
        assert!(err.contains("`env`") && err.contains("BAD NAME"), "{err}");
        let err = error_of(&MINIMAL.replace(
            "version = \"1.2.3\"",
            "version = \"1\"\nversion_command = \"x\"",
        ));
        assert!(err.contains("`version_command`"), "{err}");
    }
}
