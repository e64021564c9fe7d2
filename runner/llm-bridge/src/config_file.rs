//! The `--llm-config` file: providers (base URL, where the key comes from), the price table
//! (a path or inline) and the per-trial and per-job budgets.
//!
//! ```toml
//! prices = "prices.toml"              # relative to this file; or inline [prices.models."…"]
//!
//! [[providers]]
//! name = "openai"                     # the prefix of declared models: openai/gpt-4.1-mini
//! api = "openai"                      # or "anthropic"
//! base_url = "https://api.openai.com/v1"
//! key_env = "OPENAI_API_KEY"          # or key_file = "/path/to/key" (exactly one)
//!
//! [budget.trial]
//! max_tokens = 2_000_000
//! max_cost_usd = 2.0
//!
//! [budget.job]
//! max_cost_usd = 100.0
//!
//! allow_network_tools = false         # true forwards server tools (web_search, web_fetch,
//!                                     # mcp_servers, code execution); see request_policy
//! max_recorded_bytes_per_trial = 268435456   # the cap on one trial's llm/ record
//! ```
//!
//! (Top-level keys go before the first table in a real file.)
//!
//! Without `[[providers]]` the bridge uses OpenAI and Anthropic from the runner's environment
//! (`OPENAI_API_KEY`/`OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`/`ANTHROPIC_BASE_URL`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::{ApiKind, BridgeConfig, Budget, KeySource, ProviderConfig};
use crate::prices::{PriceTable, PriceTableError};

/// A loaded `--llm-config` file.
#[derive(Debug, Clone)]
pub struct LlmConfigFile {
    /// The bridge's config: providers, prices, job budget.
    pub bridge: BridgeConfig,
    /// Each trial's budget.
    pub trial_budget: Budget,
}

/// Why the file could not be used; every message names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum LlmConfigError {
    /// The file could not be read.
    #[error("cannot read the LLM config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML of the expected shape.
    #[error("the LLM config {path} is invalid: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What TOML or serde said, with the field.
        source: toml::de::Error,
    },
    /// A provider gives both or neither of `key_env` and `key_file`.
    #[error(
        "the LLM config {path}: provider '{provider}' must give exactly one of key_env and key_file"
    )]
    KeySource {
        /// The file.
        path: PathBuf,
        /// The provider.
        provider: String,
    },
    /// The price table is invalid.
    #[error(transparent)]
    Prices(#[from] PriceTableError),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    providers: Vec<RawProvider>,
    prices: Option<RawPrices>,
    #[serde(default)]
    budget: RawBudgets,
    allow_network_tools: Option<bool>,
    max_recorded_bytes_per_trial: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    name: String,
    api: ApiKind,
    base_url: String,
    key_env: Option<String>,
    key_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawPrices {
    File(PathBuf),
    Inline(toml::Table),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudgets {
    #[serde(default)]
    trial: RawBudget,
    #[serde(default)]
    job: RawBudget,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
}

impl From<RawBudget> for Budget {
    fn from(raw: RawBudget) -> Budget {
        Budget {
            max_tokens: raw.max_tokens,
            max_cost_usd: raw.max_cost_usd,
        }
    }
}

impl LlmConfigFile {
    /// The defaults of a job without a file: providers from the host environment, no prices,
    /// no budgets.
    pub fn from_host_env() -> LlmConfigFile {
        LlmConfigFile {
            bridge: BridgeConfig::from_host_env(),
            trial_budget: Budget::UNLIMITED,
        }
    }

    /// Reads and checks `path`. Relative paths inside it are relative to its directory.
    pub fn load(path: &Path) -> Result<LlmConfigFile, LlmConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| LlmConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses the file's text; `path` names it in errors and anchors relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<LlmConfigFile, LlmConfigError> {
        let raw: Raw = toml::from_str(text).map_err(|source| LlmConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut bridge = if raw.providers.is_empty() {
            BridgeConfig::from_host_env()
        } else {
            let mut providers = Vec::new();
            for p in raw.providers {
                let key = match (p.key_env, p.key_file) {
                    (Some(name), None) => KeySource::Env(name),
                    (None, Some(file)) => KeySource::File(base.join(file)),
                    _ => {
                        return Err(LlmConfigError::KeySource {
                            path: path.to_owned(),
                            provider: p.name,
                        });
                    }
                };
                providers.push(ProviderConfig {
                    name: p.name,
                    api: p.api,
                    base_url: p.base_url,
                    key,
                });
            }
            BridgeConfig::new(providers)
        };
        bridge.prices = match raw.prices {
            None => PriceTable::default(),
            Some(RawPrices::File(file)) => PriceTable::load(&base.join(file))?,
            Some(RawPrices::Inline(table)) => {
                PriceTable::parse(&toml::to_string(&table).unwrap_or_default(), path)?
            }
        };
        bridge.job_budget = raw.budget.job.into();
        if let Some(allow) = raw.allow_network_tools {
            bridge.allow_network_tools = allow;
        }
        if let Some(cap) = raw.max_recorded_bytes_per_trial {
            bridge.max_recorded_bytes_per_trial = cap;
        }
        Ok(LlmConfigFile {
            bridge,
            trial_budget: raw.budget.trial.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_prices_and_budgets_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("prices.toml"),
            "[models.\"local/m\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n",
        )
        .unwrap();
        let path = dir.path().join("llm.toml");
        let text = r#"
            prices = "prices.toml"
            allow_network_tools = true
            max_recorded_bytes_per_trial = 1000
            [[providers]]
            name = "local"
            api = "openai"
            base_url = "http://127.0.0.1:1/v1"
            key_file = "key.txt"
            [budget.trial]
            max_tokens = 100
            [budget.job]
            max_cost_usd = 1.5
        "#;
        let config = LlmConfigFile::parse(text, &path).unwrap();
        assert_eq!(config.bridge.providers.len(), 1);
        assert_eq!(
            config.bridge.providers[0].key,
            KeySource::File(dir.path().join("key.txt"))
        );
        assert!(config.bridge.prices.models.contains_key("local/m"));
        assert_eq!(config.trial_budget.max_tokens, Some(100));
        assert_eq!(config.bridge.job_budget.max_cost_usd, Some(1.5));
        assert!(config.bridge.allow_network_tools);
        assert_eq!(config.bridge.max_recorded_bytes_per_trial, 1000);
        let plain = LlmConfigFile::parse("", &path).unwrap();
        assert!(!plain.bridge.allow_network_tools);
    }

    #[test]
    fn inline_prices_and_the_host_env_default() {
        let text = "[prices.models.\"openai/x\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n";
        let config = LlmConfigFile::parse(text, Path::new("/etc/llm.toml")).unwrap();
        assert_eq!(config.bridge.providers.len(), 2);
        assert!(config.bridge.prices.models.contains_key("openai/x"));
        assert_eq!(config.trial_budget, Budget::UNLIMITED);
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let path = Path::new("/x/llm.toml");
        let both = "[[providers]]\nname = \"p\"\napi = \"open_ai\"\nbase_url = \"u\"\nkey_env = \"A\"\nkey_file = \"b\"\n";
        let err = LlmConfigFile::parse(both, path).unwrap_err().to_string();
        assert!(err.contains("/x/llm.toml") && err.contains("'p'"), "{err}");
        let unknown = "[budget.trial]\nmax_tokns = 3\n";
        let err = LlmConfigFile::parse(unknown, path).unwrap_err().to_string();
        assert!(err.contains("max_tokns"), "{err}");
    }
}
