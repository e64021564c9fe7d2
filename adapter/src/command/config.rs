//! The command-style agent config: the same TOML file format as installed agents, with a
//! `[run] command` where an installed agent has `[server]`. [`AgentConfigFile::load`] reads
//! either kind; which one a file is follows from that one table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::prepare::PrepareSection;
use super::template;
use crate::installed::{
    AgentConfigError, InstalledAgentConfig, TracesSection, check_identity, deserialize_toml,
    is_env_name, read_config,
};

/// Placeholders every command may use.
const PLACEHOLDERS_ANYWHERE: &[&str] = &["model", "model_provider", "model_name", "logs_dir"];
/// Placeholders only `run.command` may use: they describe the trial's run.
const PLACEHOLDERS_RUN: &[&str] = &["instruction_file", "workdir", "agent_timeout_sec"];

/// An agent config file of either kind.
#[derive(Debug, Clone)]
// Read once per job; boxing either side would only add noise at the match.
#[allow(clippy::large_enum_variant)]
pub enum AgentConfigFile {
    /// `[server]`: an agent driven through its in-container task API.
    Installed(InstalledAgentConfig),
    /// `[run] command`: an agent run as one command per trial.
    Command(CommandAgentConfig),
}

impl AgentConfigFile {
    /// Loads and checks `path`, whichever kind it is.
    pub fn load(path: &Path) -> Result<Self, AgentConfigError> {
        Self::parse(path, &read_config(path)?)
    }

    /// Parses config text; `path` names the file in messages and resolves relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Self, AgentConfigError> {
        let table: toml::Table = deserialize_toml(path, text)?;
        match (table.contains_key("run"), table.contains_key("server")) {
            (true, true) => Err(AgentConfigError::Invalid {
                file: path.into(),
                key: "run".into(),
                message: "give either [run] (a command-style agent) or [server] (an agent with a task API), not both".into(),
            }),
            (true, false) => CommandAgentConfig::parse(path, text).map(Self::Command),
            (false, _) => InstalledAgentConfig::parse(path, text).map(Self::Installed),
        }
    }
}

crate::file_agent::agent_config_struct! {
/// A command-style agent: install commands, then one command per trial that gets the
/// instruction and runs to the end (or is killed at the agent deadline).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandAgentConfig {
    /// Files fetched once on the host and mounted read-only in every trial.
    #[serde(default)]
    pub prepare: Option<PrepareSection>,
    /// Install commands.
    #[serde(default)]
    pub install: CommandInstallSection,
    /// The run command.
    pub run: RunSection,
    /// Env for every command in the container (install, version, run).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Container paths collected into `agent/traces/` after the run.
    #[serde(default)]
    pub traces: TracesSection,
    /// How `agent/trajectory.json` is made from a collected trace.
    #[serde(default)]
    pub trajectory: CommandTrajectorySection,
    /// The config file, for messages.
    #[serde(skip)]
    pub config_file: PathBuf,
}
}

/// `[install]` of a command-style agent.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandInstallSection {
    /// Commands run as root, in order, under the agent setup deadline; any failure fails setup.
    #[serde(default)]
    pub commands: Vec<String>,
    /// Give install commands this machine's way to the package index: its CA bundle (copied
    /// into the container; `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE` and `PIP_CERT` point at it)
    /// and its pip index settings (`PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL`, `PIP_TRUSTED_HOST`,
    /// and uv's `UV_*` names for them).
    #[serde(default)]
    pub host_package_index: bool,
}

/// `[run]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// The command, run through `bash -c` in the task's workdir with the placeholders filled.
    pub command: String,
    /// Run as this user instead of the task's agent user.
    #[serde(default)]
    pub user: Option<String>,
}

/// What the collected trace file is.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CommandTrajectoryFormat {
    /// No trajectory.
    #[default]
    None,
    /// The agent writes ATIF itself; it is validated and copied.
    Atif,
    /// mini-swe-agent's own trajectory JSON (`--output`), converted to ATIF.
    MiniSweAgent,
    /// Claude Code's session log (JSONL, one file per session), converted to ATIF.
    ClaudeCode,
    /// Codex's rollout log (JSONL), converted to ATIF.
    Codex,
}

impl CommandTrajectoryFormat {
    /// Whether the trace is named by a pattern (`*` in a path under `agent/traces/`): the
    /// agents whose logs are named by a session id or a date.
    pub fn by_pattern(self) -> bool {
        matches!(self, Self::ClaudeCode | Self::Codex)
    }
}

/// `[trajectory]` of a command-style agent.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandTrajectorySection {
    /// The format of `file`.
    #[serde(default)]
    pub format: CommandTrajectoryFormat,
    /// The trace file (its name under `agent/traces/`) to convert; for the formats whose logs
    /// are named by a session id or date, a pattern under `agent/traces/` (`*` matches within
    /// one path segment; the newest match is converted).
    #[serde(default)]
    pub file: Option<String>,
}

impl CommandAgentConfig {
    /// Parses and checks config text; `path` names the file in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Self, AgentConfigError> {
        let mut config: CommandAgentConfig = deserialize_toml(path, text)?;
        config.config_file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        config
            .check()
            .map_err(|(key, message)| AgentConfigError::Invalid {
                file: path.into(),
                key,
                message,
            })?;
        Ok(config)
    }

    fn check(&self) -> Result<(), (String, String)> {
        check_identity(
            &self.name,
            (&self.version, &self.version_command),
            (&self.model_name, &self.models),
        )
        .map_err(|(key, message)| (key.to_owned(), message))?;
        if self.run.command.trim().is_empty() {
            return Err(("run.command".into(), "must not be empty".into()));
        }
        for (key, command) in self.commands() {
            check_placeholders(&key, command)?;
        }
        for (name, value) in &self.kwargs {
            if !template::is_kwarg_key(name) {
                return Err((
                    "kwargs".into(),
                    format!("`{name}` is not a kwarg name (letters, digits and '_')"),
                ));
            }
            if value.is_null() {
                return Err((format!("kwargs.{name}"), "must not be null".into()));
            }
        }
        if let Some(name) = self.env.keys().find(|n| !is_env_name(n)) {
            return Err((
                "env".into(),
                format!("`{name}` is not a valid environment variable name"),
            ));
        }
        if let Some(path) = self.traces.files.iter().find(|p| !p.starts_with('/')) {
            return Err((
                "traces.files".into(),
                format!("`{path}` must be an absolute container path"),
            ));
        }
        let format = self.trajectory.format;
        match &self.trajectory.file {
            None if format != CommandTrajectoryFormat::None => Err((
                "trajectory.file".into(),
                "name the trace file to convert, or set trajectory.format = \"none\"".into(),
            )),
            Some(file) if format.by_pattern() && !is_trace_pattern(file) => Err((
                "trajectory.file".into(),
                format!(
                    "`{file}` must be a relative path pattern under agent/traces/ (no '..', no leading '/')"
                ),
            )),
            Some(file)
                if !format.by_pattern()
                    && (file.is_empty() || file.contains('/') || file == "..") =>
            {
                Err((
                    "trajectory.file".into(),
                    format!("`{file}` must be a file name under agent/traces/, without '/'"),
                ))
            }
            Some(_) if self.traces.files.is_empty() => Err((
                "traces.files".into(),
                "list the container path of the trajectory file so it is collected".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Every configured command with its key (and the prepared wheel's requirement), for
    /// checks and for the placeholders in use.
    pub fn commands(&self) -> Vec<(String, &str)> {
        let mut commands: Vec<(String, &str)> = self
            .install
            .commands
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("install.commands[{i}]"), c.as_str()))
            .collect();
        if let Some(command) = &self.version_command {
            commands.push(("version_command".into(), command));
        }
        if let Some(prepare) = &self.prepare {
            commands.push(("prepare.wheel".into(), &prepare.wheel));
        }
        commands.push(("run.command".into(), &self.run.command));
        commands
    }
}

/// A pattern of `[trajectory] file`: relative, without `..`, not empty.
fn is_trace_pattern(file: &str) -> bool {
    !file.is_empty()
        && !file.starts_with('/')
        && file
            .split('/')
            .all(|part| !part.is_empty() && part != ".." && part != ".")
}

/// Refuses placeholders `key`'s command cannot have, naming the ones it can.
fn check_placeholders(key: &str, command: &str) -> Result<(), (String, String)> {
    let in_run = key == "run.command";
    for name in template::placeholders(command) {
        let known = template::kwarg_of(&name).is_some()
            || PLACEHOLDERS_ANYWHERE.contains(&name.as_str())
            || (in_run && PLACEHOLDERS_RUN.contains(&name.as_str()));
        if !known {
            let mut allowed: Vec<&str> = PLACEHOLDERS_ANYWHERE.to_vec();
            if in_run {
                allowed.extend(PLACEHOLDERS_RUN);
            }
            let allowed = allowed
                .iter()
                .map(|n| format!("{{{n}}}"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err((
                key.to_owned(),
                format!(
                    "unknown placeholder `{{{name}}}`; this command can use {allowed} and {{kwargs.NAME}} (write `{{{{` for a literal brace)"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_agent::test_configs::{COMMAND as MINIMAL, INSTALLED, error_of, parse};

    #[test]
    fn a_run_table_makes_a_command_agent_and_a_server_table_an_installed_one() {
        let AgentConfigFile::Command(config) = parse(MINIMAL).unwrap() else {
            panic!("a command agent");
        };
        assert_eq!(config.name, "cmd-agent");
        assert_eq!(config.trajectory.format, CommandTrajectoryFormat::None);
        assert!(!config.install.host_package_index);
        assert!(matches!(
            parse(INSTALLED).unwrap(),
            AgentConfigFile::Installed(_)
        ));
        let err = error_of(&format!("{MINIMAL}[server]\ncommand = \"s\"\nport = 1\n"));
        assert!(err.contains("`run`") && err.contains("not both"), "{err}");
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let cases = [
            (
                MINIMAL.replace("[run]\n", "[run]\nport = 3\n"),
                "`run.port`",
            ),
            (MINIMAL.replace("command = ", "commandx = "), "command"),
            (
                MINIMAL.replace("{instruction_file}", "{instructions}"),
                "`run.command`",
            ),
            (
                format!(
                    "{MINIMAL}[install]\ncommands = [\"pip install x\", \"cat {{instruction_file}}\"]\n"
                ),
                "`install.commands[1]`",
            ),
            (
                format!("{MINIMAL}[trajectory]\nformat = \"atif\"\n"),
                "`trajectory.file`",
            ),
            (
                format!("{MINIMAL}[trajectory]\nformat = \"mini-swe-agent\"\nfile = \"t.json\"\n"),
                "`traces.files`",
            ),
            (
                format!("{MINIMAL}[trajectory]\nformat = \"events\"\nfile = \"t.json\"\n"),
                "`trajectory.format`",
            ),
            (
                format!("{MINIMAL}[traces]\nfiles = [\"relative.json\"]\n"),
                "`traces.files`",
            ),
            (format!("{MINIMAL}[env]\n\"A B\" = \"1\"\n"), "`env`"),
            (format!("{MINIMAL}[kwargs]\n\"bad-key\" = 1\n"), "`kwargs`"),
            (
                MINIMAL.replace("name = \"cmd-agent\"", "name = \"a/b\""),
                "`name`",
            ),
            (
                MINIMAL.replace(
                    "version = \"1.0\"",
                    "version = \"1\"\nversion_command = \"v\"",
                ),
                "`version_command`",
            ),
            (
                MINIMAL.replace("version = \"1.0\"", "models = [\"a/x\", \"a/x\"]"),
                "`models`: \"a/x\" is listed twice",
            ),
            (
                MINIMAL.replace(
                    "version = \"1.0\"",
                    "models = [\"a/x\"]\nmodel_name = \"a/y\"",
                ),
                "`model_name`: \"a/y\" is not among `models`",
            ),
            ("[run\n".to_owned(), "(syntax)"),
        ];
        for (text, key) in cases {
            let err = error_of(&text);
            assert!(err.starts_with("agent config /cfg/agent.toml"), "{err}");
            assert!(err.contains(key), "{key}: {err}");
        }
        let err = error_of(&MINIMAL.replace("{instruction_file}", "{instructions}"));
        assert!(
            err.contains("{instruction_file}") && err.contains("{{"),
            "{err}"
        );
    }

    #[test]
    fn install_commands_may_use_model_and_kwargs_but_not_the_run_placeholders() {
        let text = format!(
            "{MINIMAL}[install]\ncommands = [\"pip install agent=={{kwargs.version}} # {{model_provider}}\"]\n[kwargs]\nversion = \"1.2\"\n"
        );
        let AgentConfigFile::Command(config) = parse(&text).unwrap() else {
            panic!("a command agent");
        };
        assert_eq!(config.kwargs["version"], "1.2");
        assert_eq!(config.commands().len(), 2);
        let text = MINIMAL.replace("version = \"1.0\"", "version_command = \"x {workdir}\"");
        let err = error_of(&text);
        assert!(err.contains("`version_command`"), "{err}");
    }

    #[test]
    fn the_shipped_agent_configs_load_as_command_agents() {
        for name in ["mini-swe-agent", "aider"] {
            let path =
                Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("agents/{name}/agent.toml"));
            let Ok(AgentConfigFile::Command(config)) = AgentConfigFile::load(&path) else {
                panic!("{name}: {:?}", AgentConfigFile::load(&path).err());
            };
            assert_eq!(config.name, name);
            assert!(config.install.host_package_index, "{name}");
            assert!(config.kwargs.contains_key("version"), "{name}");
            assert!(config.run.command.contains("{model}"), "{name}");
        }
    }
}
