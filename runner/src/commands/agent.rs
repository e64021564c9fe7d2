//! Choosing the agent of `runner run`: a built-in one by name, or an installed or command-style
//! agent from its config file, made once for the whole job.

use std::collections::BTreeMap;
use std::path::Path;

use adapter::command::template::parse_kwargs;
use adapter::{
    AgentConfigFile, AnyAgent, BUILTIN_AGENTS, CommandAgent, CommandAgentOptions, InstalledAgent,
    InstalledAgentConfig, catalogue,
};

use crate::exit::CliError;
use crate::note;

/// The agent flags of `runner run`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentChoice<'a> {
    /// `--agent`: a built-in agent's name, or a config file's path.
    pub name: Option<&'a str>,
    /// `--agent-config`.
    pub config: Option<&'a Path>,
    /// `--agent-env NAME=VALUE`.
    pub agent_env: &'a [String],
    /// `--ak KEY=VALUE`.
    pub agent_kwargs: &'a [String],
    /// `--tell-agent-deadline`.
    pub tell_deadline: bool,
    /// `-m/--model`.
    pub model: Option<&'a str>,
    /// `--allow-container-secrets`.
    pub allow_container_secrets: bool,
    /// `--require-clean-source`.
    pub require_clean_source: bool,
}

/// The agent `--agent NAME|FILE` or `--agent-config FILE` names. Flags an agent cannot use
/// (`--agent-env` for built-in agents, `--ak` for any but command-style ones) are refused
/// rather than ignored.
pub fn choose(choice: &AgentChoice<'_>) -> Result<AnyAgent, CliError> {
    let kwargs = parse_kwargs(choice.agent_kwargs).map_err(CliError::bad_input)?;
    let config_path = match (choice.name, choice.config) {
        (Some(name), None) => match AnyAgent::builtin(name) {
            Some(agent) => return builtin(name, agent, choice, kwargs.is_empty()),
            None if Path::new(name).is_file() => Path::new(name),
            None => return catalogued(name, choice, kwargs),
        },
        (None, Some(path)) => path,
        _ => return Err(CliError::bad_input("give either --agent or --agent-config")),
    };
    let extra_env = parse_env_pairs(choice.agent_env).map_err(CliError::bad_input)?;
    let agent = match AgentConfigFile::load(config_path).map_err(CliError::bad_input)? {
        AgentConfigFile::Installed(config) => {
            if !kwargs.is_empty() {
                return Err(CliError::bad_input(format!(
                    "--ak/--agent-kwarg: {} is an agent with a task API, which takes no kwargs; kwargs fill the {{kwargs.NAME}} placeholders of a command-style agent ([run] command)",
                    config_path.display()
                )));
            }
            installed(config, extra_env, choice)?
        }
        AgentConfigFile::Command(config) => command(config, extra_env, kwargs, choice)?,
    };
    if choice.allow_container_secrets {
        note!(
            "warning: --allow-container-secrets: credentials may reach containers; this job is not publishable"
        );
    }
    Ok(agent)
}

/// `--agent NAME` of the catalogue (Harbor's names), or the refusal that names what exists.
fn catalogued(
    name: &str,
    choice: &AgentChoice<'_>,
    kwargs: serde_json::Map<String, serde_json::Value>,
) -> Result<AnyAgent, CliError> {
    if let Some(why) = catalogue::refusal(name) {
        return Err(CliError::bad_input(format!("--agent {name:?}: {why}")));
    }
    let Some(entry) = catalogue::entry(name) else {
        let names: Vec<&str> = catalogue::CATALOGUE.iter().map(|e| e.name).collect();
        return Err(CliError::bad_input(format!(
            "--agent {name:?} is neither a built-in agent ({}), an agent of the catalogue ({}; `runner agents list`) nor an agent config file",
            BUILTIN_AGENTS.join(", "),
            names.join(", ")
        )));
    };
    let extra_env = parse_env_pairs(choice.agent_env).map_err(CliError::bad_input)?;
    match entry.load().map_err(CliError::bad_input)? {
        AgentConfigFile::Command(config) => command(config, extra_env, kwargs, choice),
        AgentConfigFile::Installed(config) => installed(config, extra_env, choice),
    }
}

fn command(
    config: adapter::CommandAgentConfig,
    extra_env: BTreeMap<String, String>,
    kwargs: serde_json::Map<String, serde_json::Value>,
    choice: &AgentChoice<'_>,
) -> Result<AnyAgent, CliError> {
    let options = CommandAgentOptions {
        extra_env,
        kwargs,
        model: choice.model.map(str::to_owned),
        allow_container_secrets: choice.allow_container_secrets,
        tell_deadline: choice.tell_deadline,
    };
    Ok(CommandAgent::new(config, options)
        .map_err(CliError::bad_input)?
        .into())
}

fn builtin(
    name: &str,
    agent: AnyAgent,
    choice: &AgentChoice<'_>,
    no_kwargs: bool,
) -> Result<AnyAgent, CliError> {
    if !choice.agent_env.is_empty() {
        return Err(CliError::bad_input(format!(
            "--agent-env: the built-in agent {name} takes no environment; use it with --agent-config"
        )));
    }
    if !no_kwargs {
        return Err(CliError::bad_input(format!(
            "--ak/--agent-kwarg: the built-in agent {name} takes no kwargs"
        )));
    }
    refuse_deadline(
        choice,
        &format!("the built-in agent {name} reads no instruction"),
    )?;
    Ok(agent)
}

/// `--tell-agent-deadline` where the agent is not one whose instruction it can extend.
fn refuse_deadline(choice: &AgentChoice<'_>, why: &str) -> Result<(), CliError> {
    if choice.tell_deadline {
        return Err(CliError::bad_input(format!(
            "--tell-agent-deadline: {why}; only command-style agents (the catalogue's, or a config with [run] command) are told their deadline"
        )));
    }
    Ok(())
}

fn installed(
    config: InstalledAgentConfig,
    extra_env: BTreeMap<String, String>,
    choice: &AgentChoice<'_>,
) -> Result<AnyAgent, CliError> {
    refuse_deadline(
        choice,
        &format!("{} is an agent with a task API", config.name),
    )?;
    let agent = InstalledAgent::new(
        config,
        extra_env,
        choice.allow_container_secrets,
        choice.require_clean_source,
    )
    .map_err(CliError::bad_input)?;
    let provenance = agent.source_provenance();
    if provenance.is_dirty() {
        note!(
            "note: the agent source has uncommitted changes; they are recorded as counts in agent/source-provenance.json (use --require-clean-source to refuse)"
        );
    }
    note!("agent source: sha256 {}", provenance.tar_sha256());
    Ok(agent.into())
}

/// Parses repeated `NAME=VALUE` flags; never echoes a value in an error.
fn parse_env_pairs(pairs: &[String]) -> Result<BTreeMap<String, String>, String> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
            _ => {
                let name = pair.split('=').next().unwrap_or_default();
                Err(format!("--agent-env {name:?}: expected NAME=VALUE"))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_pairs_parse_and_errors_hide_values() {
        let env = parse_env_pairs(&["A=1".into(), "B=x=y".into()]).unwrap();
        assert_eq!(env["B"], "x=y");
        let err = parse_env_pairs(&["=secretvalue".into()]).unwrap_err();
        assert!(!err.contains("secretvalue"), "{err}");
    }

    #[test]
    fn builtin_agents_refuse_agent_env_kwargs_and_unknown_names() {
        let named = |name| AgentChoice {
            name: Some(name),
            ..AgentChoice::default()
        };
        let refused = |choice: AgentChoice| choose(&choice).unwrap_err();
        assert!(choose(&named("oracle")).is_ok());
        let env = ["A=1".to_owned()];
        let err = refused(AgentChoice {
            agent_env: &env,
            ..named("nop")
        });
        assert!(err.to_string().starts_with("--agent-env"), "{err}");
        let kwargs = ["x=1".to_owned()];
        let err = refused(AgentChoice {
            agent_kwargs: &kwargs,
            ..named("nop")
        });
        assert!(err.to_string().starts_with("--ak/--agent-kwarg"), "{err}");
        let err = refused(named("claude"));
        assert!(err.to_string().contains("oracle, nop"), "{err}");
        let err = refused(AgentChoice {
            tell_deadline: true,
            ..named("oracle")
        });
        assert!(
            err.to_string().starts_with("--tell-agent-deadline"),
            "{err}"
        );
        let told = choose(&AgentChoice {
            tell_deadline: true,
            model: Some("anthropic/claude-sonnet-4-5"),
            ..named("claude-code")
        });
        assert!(told.is_ok(), "a catalogue agent is told: {:?}", told.err());
        let bad = ["1x=2".to_owned()];
        let err = refused(AgentChoice {
            agent_kwargs: &bad,
            ..named("oracle")
        });
        assert!(err.to_string().contains("\"1x\""), "{err}");
    }

    #[test]
    fn a_config_path_given_to_agent_loads_a_command_agent_with_kwargs_and_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        std::fs::write(
            &path,
            "name = \"cmd\"\n[kwargs]\nlimit = 1\n[run]\ncommand = \"run {model} {kwargs.limit} {kwargs.extra}\"\n",
        )
        .unwrap();
        let name = path.to_str().unwrap();
        let kwargs = ["limit=3".to_owned()];
        let err = choose(&AgentChoice {
            name: Some(name),
            agent_kwargs: &kwargs,
            model: Some("openai/gpt-4.1"),
            ..AgentChoice::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("`run.command`")
                && err.to_string().contains("--ak extra=VALUE"),
            "{err}"
        );
        let kwargs = ["limit=3".to_owned(), "extra=x y".to_owned()];
        let agent = choose(&AgentChoice {
            name: Some(name),
            agent_kwargs: &kwargs,
            model: Some("openai/gpt-4.1"),
            ..AgentChoice::default()
        })
        .unwrap();
        let entry = adapter::Agent::job_config(&agent);
        assert_eq!(entry.name.as_deref(), Some("cmd"));
        assert_eq!(entry.model_name.as_deref(), Some("openai/gpt-4.1"));
        assert_eq!(entry.kwargs["limit"], 3);
        assert_eq!(entry.kwargs["extra"], "x y");
        let err = choose(&AgentChoice {
            name: Some(name),
            agent_kwargs: &kwargs,
            ..AgentChoice::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("-m/--model"), "{err}");
    }
}
