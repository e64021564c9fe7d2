//! The agents `-a NAME` names: Harbor's names for the agents people submit, each one a config
//! file under `adapter/agents/<name>/agent.toml` (the format users write themselves), built
//! into the binary so `-a claude-code` works from any directory.
//!
//! Harbor names that runner cannot run as it runs everything else (an agent loop on the host
//! with Harbor's own prompts, or a service) are refused by name, with why and what to use.

use std::path::PathBuf;

use crate::{AgentConfigError, AgentConfigFile};

/// One catalogue entry: Harbor's name and its config file's text.
#[derive(Debug, Clone, Copy)]
pub struct CatalogueEntry {
    /// Harbor's name (`-a NAME`).
    pub name: &'static str,
    /// The config file's text.
    pub config: &'static str,
    /// Where the agent's files come from, for `runner agents list`.
    pub source: &'static str,
    /// The provider API the agent speaks.
    pub api: &'static str,
}

macro_rules! entry {
    ($name:literal, $source:literal, $api:literal) => {
        CatalogueEntry {
            name: $name,
            config: include_str!(concat!("../agents/", $name, "/agent.toml")),
            source: $source,
            api: $api,
        }
    };
}

/// Every agent of the catalogue, by name.
pub const CATALOGUE: &[CatalogueEntry] = &[
    entry!(
        "claude-code",
        "PyPI wheel claude-agent-sdk (bundles Claude Code), prepared once on the host",
        "Anthropic Messages"
    ),
    entry!(
        "codex",
        "PyPI wheel openai-codex-cli-bin (bundles Codex), prepared once on the host",
        "OpenAI Responses"
    ),
    entry!(
        "mini-swe-agent",
        "PyPI mini-swe-agent, installed in the container",
        "OpenAI chat completions (litellm)"
    ),
    entry!(
        "aider",
        "PyPI aider-chat, installed in the container",
        "OpenAI chat completions (litellm)"
    ),
    entry!(
        "kimi-cli",
        "PyPI kimi-cli (with uv), installed in the container; needs Python 3.12+ in the image",
        "OpenAI chat completions or Anthropic Messages"
    ),
    entry!(
        "openhands",
        "PyPI openhands-ai (with uv), installed in the container",
        "OpenAI chat completions or Anthropic Messages (litellm)"
    ),
    entry!(
        "gemini-cli",
        "npm @google/gemini-cli, installed in the container (npm is not reachable here)",
        "Google generateContent (the LLM bridge does not serve it)"
    ),
    entry!(
        "opencode",
        "npm opencode-ai, installed in the container (npm is not reachable here)",
        "OpenAI Responses or Anthropic Messages"
    ),
    entry!(
        "qwen-coder",
        "npm @qwen-code/qwen-code, installed in the container (npm is not reachable here)",
        "OpenAI chat completions"
    ),
    entry!(
        "goose",
        "Block's install script, in the container (GitHub is not reachable here)",
        "OpenAI chat completions or Anthropic Messages"
    ),
    entry!(
        "cursor-cli",
        "Cursor's install script, in the container; Cursor's own service only",
        "Cursor's service (not through the LLM bridge)"
    ),
];

/// Harbor names runner refuses, and why.
const REFUSED: &[(&str, &str)] = &[(
    "terminus-2",
    "Harbor's terminus-2 is an agent loop that runs on the host with Harbor's own prompts and keystrokes into tmux; runner does not ship Harbor's prompts. Use -a claude-code, -a codex or -a mini-swe-agent, or run terminus-2 with Harbor itself",
)];

/// The path shown in messages for an entry's config (it lives in the binary).
pub fn entry_path(name: &str) -> PathBuf {
    PathBuf::from(format!("<catalogue>/{name}/agent.toml"))
}

/// Why `name` is in no catalogue entry, when Harbor has it and runner refuses it.
pub fn refusal(name: &str) -> Option<&'static str> {
    REFUSED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why)
}

/// The entry called `name`.
pub fn entry(name: &str) -> Option<&'static CatalogueEntry> {
    CATALOGUE.iter().find(|e| e.name == name)
}

impl CatalogueEntry {
    /// The entry's config, parsed and checked.
    pub fn load(&self) -> Result<AgentConfigFile, AgentConfigError> {
        AgentConfigFile::parse(&entry_path(self.name), self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_loads_under_its_own_name() {
        for entry in CATALOGUE {
            let config = entry
                .load()
                .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            let name = match &config {
                AgentConfigFile::Command(c) => &c.name,
                AgentConfigFile::Installed(c) => &c.name,
            };
            assert_eq!(name, entry.name);
        }
    }

    #[test]
    fn refused_names_say_what_to_use_and_are_not_entries() {
        for (name, why) in REFUSED {
            assert!(entry(name).is_none());
            assert!(why.contains("-a claude-code"), "{why}");
        }
        assert!(refusal("claude-code").is_none());
    }
}
