//! `runner run --agent-config`: jobs with an installed agent.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use adapter::{InstalledAgent, InstalledAgentConfig};
use tasks::Dataset;

use super::run::{RunArgs, execute};
use crate::exit_codes;

/// Runs a job with the installed agent described by `config`.
pub async fn run_installed(args: &RunArgs, config: &Path, dataset: Dataset) -> u8 {
    let extra_env = match parse_env_pairs(&args.agent_env) {
        Ok(env) => env,
        Err(message) => {
            eprintln!("error: {message}");
            return exit_codes::BAD_INPUT;
        }
    };
    let loaded = match InstalledAgentConfig::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return exit_codes::BAD_INPUT;
        }
    };
    let agent = match InstalledAgent::new(
        loaded,
        extra_env,
        args.allow_container_secrets,
        args.require_clean_source,
    ) {
        Ok(agent) => agent,
        Err(e) => {
            eprintln!("error: {e}");
            return exit_codes::BAD_INPUT;
        }
    };
    let provenance = agent.source_provenance();
    if provenance.is_dirty() {
        eprintln!(
            "note: the agent source has uncommitted changes; they are recorded as counts in agent/source-provenance.json (use --require-clean-source to refuse)"
        );
    }
    eprintln!("agent source: sha256 {}", provenance.tar_sha256());
    if args.allow_container_secrets {
        eprintln!(
            "warning: --allow-container-secrets: credentials may reach containers; this job is not publishable"
        );
    }
    let recorded = (
        agent.job_agent_config(),
        agent.instruction_suffix().map(str::to_owned),
    );
    execute(
        args.clone_settings(),
        dataset,
        Arc::new(agent),
        Some(recorded),
    )
    .await
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
}
