//! What installed agents (`[server]`) and command-style agents (`[run] command`) share: the
//! identity keys that open every agent config file, and the [`crate::Agent`] methods that
//! report them. Both are macros because serde's `deny_unknown_fields` (which turns a typo in a
//! key into an error) cannot be combined with `#[serde(flatten)]` of a shared struct, and
//! because the two agents are distinct types the engine's [`crate::AnyAgent`] dispatches to.

/// Declares an agent config struct whose first keys are the identity every agent config file
/// has (`name`, `version`, `version_command`, `model_name`, `models`, `kwargs`,
/// `instruction_suffix`), followed by the fields given.
macro_rules! agent_config_struct {
    ($(#[$meta:meta])* pub struct $name:ident { $($fields:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            /// Recorded as the job's `agents[].name` and each trial's `agent_info.name`.
            pub name: String,
            /// The agent's version, when known before setup.
            #[serde(default)]
            pub version: Option<String>,
            /// A command run in the container after install whose first non-empty stdout line
            /// is the version.
            #[serde(default)]
            pub version_command: Option<String>,
            /// The default `provider/model` when `-m/--model` is not given; recorded in the job
            /// config.
            #[serde(default)]
            pub model_name: Option<String>,
            /// Every model the agent may call (`provider/model`), for agents that call more
            /// than one or whose users pick one: `-m` must then be one of them, and without
            /// `-m` all of them are declared to the LLM bridge and recorded in the job config.
            #[serde(default)]
            pub models: Vec<String>,
            /// Agent kwargs (`{kwargs.NAME}` of command-style agents, which `--ak NAME=VALUE`
            /// overrides), recorded in the job config as Harbor's `agent.kwargs`.
            #[serde(default)]
            pub kwargs: serde_json::Map<String, serde_json::Value>,
            /// Text appended verbatim to every instruction (include leading newlines if
            /// wanted); recorded in the job config.
            #[serde(default)]
            pub instruction_suffix: Option<String>,
            $($fields)*
        }
    };
}
pub(crate) use agent_config_struct;

/// The [`crate::Agent`] methods that report an agent's identity, for a type with fields
/// `config` (an [`agent_config_struct`]), `model` (the model in use), `kwargs` (the merged
/// kwargs) and `container_env` (the env given to the container).
macro_rules! identity_methods {
    () => {
        fn name(&self) -> &str {
            &self.config.name
        }

        fn version(&self) -> String {
            self.config
                .version
                .clone()
                .unwrap_or_else(|| "unknown".into())
        }

        fn model_name(&self) -> Option<String> {
            self.model.clone()
        }

        fn declared_models(&self) -> Vec<String> {
            self.config.models.clone()
        }

        /// Name, model, kwargs (Harbor's `agent.kwargs`), and env with sensitive values
        /// redacted.
        fn job_config(&self) -> tasks::records::AgentConfig {
            tasks::records::AgentConfig {
                name: Some(self.config.name.clone()),
                model_name: self.model.clone(),
                kwargs: self.kwargs.clone(),
                env: crate::secrets::redact_env(&self.container_env),
                ..Default::default()
            }
        }

        fn instruction_suffix(&self) -> Option<&str> {
            self.config.instruction_suffix.as_deref()
        }
    };
}
pub(crate) use identity_methods;

/// Agent config text for unit tests: the smallest valid file of each kind, and how tests
/// parse text as if it were read from a file (`/cfg/agent.toml`).
#[cfg(test)]
pub(crate) mod test_configs {
    use std::path::Path;

    use crate::{AgentConfigError, AgentConfigFile};

    /// The file the tests' config text stands for; every error message names it.
    pub const PATH: &str = "/cfg/agent.toml";

    /// The smallest command-style agent config: a name, a version and `[run] command`.
    pub const COMMAND: &str = r#"
name = "cmd-agent"
version = "1.0"
[run]
command = "my-agent --model {model} --task-file {instruction_file}"
"#;

    /// The smallest installed agent config: source, server and an events trajectory.
    pub const INSTALLED: &str = r#"
name = "my-agent"
version = "1.2.3"
[source]
dir = "src"
[server]
command = "python3 {source_dir}/server.py --port {port}"
port = 8765
[trajectory]
file = "events.jsonl"
"#;

    /// Parses `text` as [`PATH`], whichever kind of agent it configures (as the runner
    /// loads `--agent-config`).
    pub fn parse(text: &str) -> Result<AgentConfigFile, AgentConfigError> {
        AgentConfigFile::parse(Path::new(PATH), text)
    }

    /// The message of the error that parsing `text` gives; panics when it parses.
    pub fn error_of(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }
}
