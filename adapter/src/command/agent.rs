//! `CommandAgent`: installs with root commands under the setup deadline, then runs one
//! command per trial under the agent deadline, as Harbor's installed agents (claude-code,
//! aider, mini-swe-agent…) do.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{Map, Value};
use tasks::Sandbox;

use super::config::CommandAgentConfig;
use super::deadline::DeadlineTold;
use super::host_index::{CONTAINER_CA_BUNDLE, HostPackageIndex};
use super::prepare::{self, PrepareError, PreparedFiles};
use super::template::{self, kwarg_text};
use crate::agent::{Agent, AgentError, AgentErrorKind, AgentRun, AgentRunReport, HostMount};
use crate::installed::{AgentConfigError, is_env_name, trial_files};
use crate::secrets::check_container_env;

/// Where agents write logs in the container; the runner collects it into `<trial>/agent/`.
const LOGS_DIR: &str = "/logs/agent";

/// What `runner run` adds to a command-style agent's config.
#[derive(Debug, Clone, Default)]
pub struct CommandAgentOptions {
    /// `--agent-env NAME=VALUE`, over the config's `[env]`.
    pub extra_env: BTreeMap<String, String>,
    /// `--ak KEY=VALUE`, over the config's `[kwargs]`.
    pub kwargs: Map<String, Value>,
    /// `-m/--model`, over the config's `model_name`.
    pub model: Option<String>,
    /// `--allow-container-secrets`.
    pub allow_container_secrets: bool,
    /// `--tell-agent-deadline`: the instruction names the run's agent timeout.
    pub tell_deadline: bool,
}

/// A command-style agent.
#[derive(Debug, Clone)]
pub struct CommandAgent {
    pub(super) config: CommandAgentConfig,
    pub(super) container_env: BTreeMap<String, String>,
    kwargs: Map<String, Value>,
    pub(super) model: Option<String>,
    /// Values of the placeholders known for the whole job (model, kwargs, logs dir).
    job_values: BTreeMap<String, String>,
    host_index: Option<HostPackageIndex>,
    /// Whether each run's instruction tells the agent its deadline ([`DeadlineTold`]).
    tell_deadline: bool,
    /// The `[prepare]` files once [`CommandAgent::prepare_host_files`] has them.
    prepared: std::sync::OnceLock<PreparedFiles>,
}

impl CommandAgent {
    /// Merges the options over the config, checks the secret boundary, and checks that every
    /// placeholder the commands use has a value (a `{kwargs.x}` without a value, or `{model}`
    /// without a model, is an error naming the command and the flag to give).
    pub fn new(
        config: CommandAgentConfig,
        options: CommandAgentOptions,
    ) -> Result<Self, AgentConfigError> {
        let file = config.config_file.clone();
        let invalid = |key: &str, message: String| AgentConfigError::Invalid {
            file: file.clone(),
            key: key.to_owned(),
            message,
        };
        if let Some(name) = options.extra_env.keys().find(|n| !is_env_name(n)) {
            return Err(invalid(
                "--agent-env",
                format!("`{name}` is not a valid environment variable name"),
            ));
        }
        let mut container_env = config.env.clone();
        container_env.extend(options.extra_env);
        let mut kwargs = config.kwargs.clone();
        kwargs.extend(options.kwargs);
        if !options.allow_container_secrets {
            check_container_env(&container_env).map_err(|source| AgentConfigError::Secret {
                file: file.clone(),
                source,
            })?;
            for (key, value) in &kwargs {
                if let Some(reason) = ::secrets::credential_reason(key, &kwarg_text(value)) {
                    return Err(invalid(
                        "--ak",
                        format!(
                            "the kwarg {key} would reach the task container, but {reason}; \
                             the model key belongs on the host (the LLM bridge holds it), or pass \
                             --allow-container-secrets (the job is then not publishable)"
                        ),
                    ));
                }
            }
        }
        let model = options
            .model
            .or_else(|| config.model_name.clone())
            .or_else(|| config.models.first().cloned());
        let mut job_values = BTreeMap::from([("logs_dir".to_owned(), LOGS_DIR.to_owned())]);
        if let Some(model) = &model {
            job_values.insert("model".into(), model.clone());
            if let Some((provider, name)) = model.split_once('/') {
                job_values.insert("model_provider".into(), provider.into());
                job_values.insert("model_name".into(), name.into());
            }
        }
        for (key, value) in &kwargs {
            job_values.insert(format!("kwargs.{key}"), kwarg_text(value));
        }
        for (key, command) in config.commands() {
            for name in template::placeholders(command) {
                if job_values.contains_key(&name) || RUN_VALUES.contains(&name.as_str()) {
                    continue;
                }
                let message = match (template::kwarg_of(&name), &model) {
                    (Some(kwarg), _) => format!(
                        "uses {{{name}}}, which has no value: pass --ak {kwarg}=VALUE or set it under [kwargs]"
                    ),
                    (None, None) => format!(
                        "uses {{{name}}}, but no model is given: pass -m/--model provider/model or set model_name"
                    ),
                    (None, Some(model)) => format!(
                        "uses {{{name}}}, but the model {model:?} is not of the form provider/model"
                    ),
                };
                return Err(invalid(&key, message));
            }
        }
        let host_index = if config.install.host_package_index {
            Some(
                HostPackageIndex::detect()
                    .map_err(|e| invalid("install.host_package_index", e.to_string()))?,
            )
        } else {
            None
        };
        Ok(Self {
            config,
            container_env,
            kwargs,
            model,
            job_values,
            host_index,
            tell_deadline: options.tell_deadline,
            prepared: std::sync::OnceLock::new(),
        })
    }

    /// Whether this agent's `[prepare]` files are used: the config has the table and the
    /// kwarg `install` does not ask for Harbor's way (its installer in each container).
    pub fn uses_prepared_files(&self) -> bool {
        self.config.prepare.is_some()
            && self.kwargs.get("install").and_then(Value::as_str) != Some("harbor")
    }

    /// Fetches the `[prepare]` files into runner's cache once (on the host, before any
    /// trial), so every trial mounts them; nothing when the agent uses none.
    pub fn prepare_host_files(&self, progress: &dyn Fn(&str)) -> Result<(), PrepareError> {
        let Some(section) = self
            .config
            .prepare
            .as_ref()
            .filter(|_| self.uses_prepared_files())
        else {
            return Ok(());
        };
        if self.prepared.get().is_some() {
            return Ok(());
        }
        let mut filled = section.clone();
        filled.wheel =
            template::expand_plain(&section.wheel, |name| self.job_values.get(name).cloned())
                .map_err(|e| PrepareError::Unpinned(e.to_string()))?;
        let files = prepare::prepare(&filled, &prepare::cache_root(), progress)?;
        let _ = self.prepared.set(files);
        Ok(())
    }

    /// The prepared files, once fetched.
    pub fn prepared_files(&self) -> Option<&PreparedFiles> {
        self.prepared.get()
    }

    /// `sha256:<hex>` of what the agent runs (its commands, traces and trajectory settings),
    /// so a resumed job notices an edited command as it notices an edited agent source.
    pub fn commands_digest(&self) -> String {
        let config = &self.config;
        let mut text = serde_json::json!({
            "commands": config.commands(),
            "run_user": config.run.user,
            "host_package_index": config.install.host_package_index,
            "traces": config.traces.files,
            "trajectory": [format!("{:?}", config.trajectory.format), config.trajectory.file.clone().unwrap_or_default()],
        });
        // Only when on, so the digest of every job run without it stays what it was.
        if self.tell_deadline {
            text["tell_agent_deadline"] = true.into();
        }
        format!(
            "sha256:{}",
            tasks::digest::sha256_hex(text.to_string().as_bytes())
        )
    }

    /// The loaded config.
    pub fn config(&self) -> &CommandAgentConfig {
        &self.config
    }

    /// `command` with the job's placeholder values and then `run_values` filled in.
    pub(super) fn fill(
        &self,
        command: &str,
        run_values: &BTreeMap<&str, String>,
    ) -> Result<String, AgentError> {
        template::expand(command, |name| {
            self.job_values
                .get(name)
                .or_else(|| run_values.get(name))
                .cloned()
        })
        .map_err(|e| AgentError::new(AgentErrorKind::SetupFailed, e.to_string()))
    }

    fn install_env(&self) -> BTreeMap<String, String> {
        let mut env = self.container_env.clone();
        if let Some(index) = &self.host_index {
            env.extend(index.env.clone());
        }
        env
    }

    async fn install<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        deadline: Instant,
    ) -> Result<(), AgentError> {
        if let Some(bundle) = self.host_index.as_ref().and_then(|i| i.ca_bundle.clone()) {
            sandbox
                .upload_bytes(bundle, CONTAINER_CA_BUNDLE, 0o644)
                .await?;
        }
        let commands = self
            .config
            .install
            .commands
            .iter()
            .map(|c| self.fill(c, &BTreeMap::new()))
            .collect::<Result<Vec<_>, _>>()?;
        trial_files::run_install_commands(
            sandbox,
            &run.trial_dir,
            &commands,
            &self.install_env(),
            None,
            deadline,
        )
        .await
    }

    /// The user the commands of the run run as.
    pub(super) fn user<'a>(&'a self, run: &'a AgentRun<'_>) -> Option<&'a str> {
        self.config.run.user.as_deref().or(run.user.as_deref())
    }
}

/// Placeholders whose values are only known during a trial's run.
pub(super) const RUN_VALUES: &[&str] = &["instruction_file", "workdir", "agent_timeout_sec"];

impl Agent for CommandAgent {
    crate::file_agent::identity_methods!();

    fn host_mounts(&self) -> Vec<HostMount> {
        self.prepared
            .get()
            .map(|files| HostMount {
                host: files.host_dir.clone(),
                container: prepare::CONTAINER_DIR.to_owned(),
            })
            .into_iter()
            .collect()
    }

    async fn setup<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<Option<String>, AgentError> {
        if self.uses_prepared_files() && self.prepared.get().is_none() {
            return Err(AgentError::new(
                AgentErrorKind::SetupFailed,
                format!(
                    "the agent {}'s prepared files were not fetched before the trial (the runner prepares them when the job starts)",
                    self.config.name
                ),
            ));
        }
        let deadline = run.setup_work_deadline();
        self.install(sandbox, run, deadline).await?;
        let version = self.config.version_command.as_deref();
        let version = version
            .map(|c| self.fill(c, &BTreeMap::new()))
            .transpose()?;
        let user = self.user(run);
        trial_files::learn_version(sandbox, version.as_deref(), user, &self.container_env, None)
            .await
    }

    async fn run<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        instruction: &str,
    ) -> Result<AgentRunReport, AgentError> {
        let told = self
            .tell_deadline
            .then(|| DeadlineTold::of_run(run.agent_timeout_sec));
        let instruction = match &told {
            Some(told) => told.appended_to(instruction),
            None => instruction.to_owned(),
        };
        let sent = run.record_instruction(&instruction, self.instruction_suffix())?;
        self.run_command(sandbox, run, &sent, told.as_ref()).await
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn agent(text: &str, options: CommandAgentOptions) -> Result<CommandAgent, AgentConfigError> {
        let config = CommandAgentConfig::parse(Path::new("/cfg/agent.toml"), text).unwrap();
        CommandAgent::new(config, options)
    }

    const CONFIG: &str = "name = \"a\"\nmodel_name = \"openai/m\"\n[kwargs]\nlimit = 1\n[run]\ncommand = \"go {model} {kwargs.limit}\"\n";

    #[test]
    fn options_override_the_config_and_the_digest_follows_the_commands() {
        let options = CommandAgentOptions {
            model: Some("anthropic/claude".into()),
            kwargs: Map::from_iter([("limit".to_owned(), Value::from(5))]),
            ..CommandAgentOptions::default()
        };
        let a = agent(CONFIG, options.clone()).unwrap();
        assert_eq!(a.model_name().as_deref(), Some("anthropic/claude"));
        assert_eq!(a.job_config().kwargs["limit"], 5);
        let filled = a.fill(&a.config.run.command, &BTreeMap::new()).unwrap();
        assert_eq!(filled, "go 'anthropic/claude' '5'");
        let b = agent(&CONFIG.replace("go ", "run "), options).unwrap();
        assert_ne!(a.commands_digest(), b.commands_digest());
        let c = agent(CONFIG, CommandAgentOptions::default()).unwrap();
        assert_eq!(
            a.commands_digest(),
            c.commands_digest(),
            "kwargs and model are in the job config"
        );
    }

    #[test]
    fn credentials_in_env_or_kwargs_are_refused_by_name_without_their_value() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789";
        let options = CommandAgentOptions {
            kwargs: Map::from_iter([("api_key".to_owned(), Value::from(key))]),
            ..CommandAgentOptions::default()
        };
        let err = agent(CONFIG, options).unwrap_err().to_string();
        assert!(err.contains("`--ak`") && err.contains("api_key"), "{err}");
        assert!(!err.contains(key), "{err}");
        let options = CommandAgentOptions {
            extra_env: BTreeMap::from([("OPENAI_API_KEY".to_owned(), key.to_owned())]),
            ..CommandAgentOptions::default()
        };
        let err = agent(CONFIG, options).unwrap_err().to_string();
        assert!(
            err.contains("OPENAI_API_KEY") && !err.contains(key),
            "{err}"
        );
        let allowed = CommandAgentOptions {
            extra_env: BTreeMap::from([("OPENAI_API_KEY".to_owned(), key.to_owned())]),
            allow_container_secrets: true,
            ..CommandAgentOptions::default()
        };
        assert!(agent(CONFIG, allowed).is_ok());
    }

    #[test]
    fn a_model_without_a_provider_cannot_fill_model_provider() {
        let text = CONFIG.replace("{model}", "{model_provider}");
        let options = CommandAgentOptions {
            model: Some("gpt-4".into()),
            ..CommandAgentOptions::default()
        };
        let err = agent(&text, options).unwrap_err().to_string();
        assert!(
            err.contains("`run.command`") && err.contains("provider/model"),
            "{err}"
        );
    }
}
