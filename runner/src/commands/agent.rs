//! Choosing the agent of `runner run`: a built-in one by name, or an installed agent from its
//! config file, packaged once for the whole job.

use std::collections::BTreeMap;
use std::path::Path;

use adapter::{AnyAgent, BUILTIN_AGENTS, InstalledAgent, InstalledAgentConfig};

use crate::exit::CliError;
use crate::note;

/// The agent `--agent NAME` or `--agent-config FILE` names. `agent_env` (`--agent-env`) only
/// reaches installed agents; giving it with a built-in agent is refused rather than ignored.
pub fn choose(
    name: Option<&str>,
    config: Option<&Path>,
    agent_env: &[String],
    allow_container_secrets: bool,
    require_clean_source: bool,
) -> Result<AnyAgent, CliError> {
    match (name, config) {
        (Some(name), None) => {
            let agent = AnyAgent::builtin(name).ok_or_else(|| {
                CliError::bad_input(format!(
                    "--agent {name:?} is not a built-in agent ({}); use --agent-config for an installed agent",
                    BUILTIN_AGENTS.join(", ")
                ))
            })?;
            if !agent_env.is_empty() {
                return Err(CliError::bad_input(format!(
                    "--agent-env: the built-in agent {name} takes no environment; use it with --agent-config"
                )));
            }
            Ok(agent)
        }
        (None, Some(path)) => installed(
            path,
            agent_env,
            allow_container_secrets,
            require_clean_source,
        ),
        _ => Err(CliError::bad_input("give either --agent or --agent-config")),
    }
}

fn installed(
    path: &Path,
    agent_env: &[String],
    allow_container_secrets: bool,
    require_clean_source: bool,
) -> Result<AnyAgent, CliError> {
    let extra_env = parse_env_pairs(agent_env).map_err(CliError::bad_input)?;
    let config = InstalledAgentConfig::load(path).map_err(CliError::bad_input)?;
    let agent = InstalledAgent::new(
        config,
        extra_env,
        allow_container_secrets,
        require_clean_source,
    )
    .map_err(CliError::bad_input)?;
    let provenance = agent.source_provenance();
    if provenance.is_dirty() {
        note!(
            "note: the agent source has uncommitted changes; they are recorded as counts in agent/source-provenance.json (use --require-clean-source to refuse)"
        );
    }
    note!("agent source: sha256 {}", provenance.tar_sha256());
    if allow_container_secrets {
        note!(
            "warning: --allow-container-secrets: credentials may reach containers; this job is not publishable"
        );
    }
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
    fn builtin_agents_refuse_agent_env_and_unknown_names() {
        assert!(choose(Some("oracle"), None, &[], false, false).is_ok());
        let err = choose(Some("nop"), None, &["A=1".into()], false, false).unwrap_err();
        assert!(err.message.starts_with("--agent-env"), "{err}");
        let err = choose(Some("claude"), None, &[], false, false).unwrap_err();
        assert!(err.message.contains("oracle, nop"), "{err}");
    }
}
