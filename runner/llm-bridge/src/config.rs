//! What a job's bridge is configured with: upstream providers (base URL, where the key comes
//! from), the price table, the job budget and resource caps.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::prices::PriceTable;
use crate::usage::Endpoint;

/// The two wire APIs the bridge speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    /// OpenAI's (and every OpenAI-compatible provider's) API, `Authorization: Bearer`.
    /// Written `openai` in config files (`open_ai` is accepted too).
    #[serde(alias = "openai")]
    OpenAi,
    /// Anthropic's Messages API, `x-api-key`.
    Anthropic,
}

impl ApiKind {
    /// The upstream URL for an endpoint. Base URLs follow each SDK's own convention, so a user
    /// can copy them from their environment: OpenAI's includes `/v1`
    /// (`https://api.openai.com/v1`), Anthropic's does not (`https://api.anthropic.com`).
    pub fn upstream_url(self, base_url: &str, endpoint: Endpoint) -> String {
        let base = base_url.trim_end_matches('/');
        match self {
            ApiKind::OpenAi => format!("{base}{}", endpoint.path()),
            ApiKind::Anthropic => format!("{base}/v1{}", endpoint.path()),
        }
    }
}

impl fmt::Display for ApiKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiKind::OpenAi => "openai",
            ApiKind::Anthropic => "anthropic",
        })
    }
}

/// Where the runner reads a provider's real key. The key is read once, when the bridge starts,
/// and only the runner process ever holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A variable of the runner's own environment, e.g. `OPENAI_API_KEY`.
    Env(String),
    /// A file holding the key (surrounding whitespace is trimmed), e.g. from `--llm-key-file`.
    File(PathBuf),
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Env(name) => write!(f, "environment variable {name}"),
            KeySource::File(path) => write!(f, "key file {}", path.display()),
        }
    }
}

/// One upstream provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The name used in declared models (`openai` in `openai/gpt-4.1`) and in records.
    pub name: String,
    /// The wire API it speaks.
    pub api: ApiKind,
    /// Its base URL, in the SDK convention of [`ApiKind::upstream_url`].
    pub base_url: String,
    /// Where its key comes from.
    pub key: KeySource,
}

impl ProviderConfig {
    /// OpenAI: key from `OPENAI_API_KEY`, base URL from `OPENAI_BASE_URL` or the public API.
    pub fn openai_from_env() -> ProviderConfig {
        ProviderConfig::from_env(
            "openai",
            ApiKind::OpenAi,
            "OPENAI",
            "https://api.openai.com/v1",
        )
    }

    /// Anthropic: key from `ANTHROPIC_API_KEY`, base URL from `ANTHROPIC_BASE_URL` or the
    /// public API.
    pub fn anthropic_from_env() -> ProviderConfig {
        ProviderConfig::from_env(
            "anthropic",
            ApiKind::Anthropic,
            "ANTHROPIC",
            "https://api.anthropic.com",
        )
    }

    /// The SDK convention: key from `<PREFIX>_API_KEY`, base URL from `<PREFIX>_BASE_URL`,
    /// else `public_url`.
    fn from_env(name: &str, api: ApiKind, env_prefix: &str, public_url: &str) -> ProviderConfig {
        ProviderConfig {
            name: name.into(),
            api,
            base_url: std::env::var(format!("{env_prefix}_BASE_URL"))
                .unwrap_or_else(|_| public_url.into()),
            key: KeySource::Env(format!("{env_prefix}_API_KEY")),
        }
    }
}

/// Limits on spending. `None` means no limit on that measure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Input plus output tokens (cached input included).
    pub max_tokens: Option<u64>,
    /// Dollars, from the price table. A dollar budget needs a price for every declared model:
    /// [`crate::Bridge::check_models`] and [`crate::Bridge::start_trial`] refuse one that
    /// cannot be priced.
    pub max_cost_usd: Option<f64>,
}

impl Budget {
    /// No limits.
    pub const UNLIMITED: Budget = Budget {
        max_tokens: None,
        max_cost_usd: None,
    };
}

/// Everything a job's [`crate::Bridge`] needs.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Upstream providers; the first one of each [`ApiKind`] serves models declared without a
    /// provider prefix.
    pub providers: Vec<ProviderConfig>,
    /// USD per million tokens per model.
    pub prices: PriceTable,
    /// The whole job's budget, over all trials (retried ones included).
    pub job_budget: Budget,
    /// Where the runner-owned socket directory is made (default: the system temp dir). Unix
    /// socket paths are limited to 107 bytes, so keep this short.
    pub socket_parent: Option<PathBuf>,
    /// The largest request body accepted from an agent; larger ones get 413. Requests are held
    /// whole because the model must be checked before anything is sent upstream.
    pub max_request_bytes: usize,
    /// The most bytes of one request or response body written to the record; the rest is cut
    /// and the call record says so.
    pub max_recorded_body_bytes: u64,
    /// The most bytes of a non-streamed response (or of one stream event) kept to read usage.
    pub max_usage_json_bytes: usize,
    /// Time to connect to an upstream.
    pub upstream_connect_timeout: Duration,
    /// The longest silence allowed between two chunks of an upstream response.
    pub upstream_read_timeout: Duration,
    /// How long [`crate::TrialBridge::close`] lets running calls finish before cutting them off.
    pub close_grace: Duration,
    /// Calls one trial may have in flight; more wait for a slot before their body is read.
    /// With `max_request_bytes` this bounds what one agent can make the runner hold.
    pub max_concurrent_calls_per_trial: usize,
    /// Forward fields and tools that make the provider reach the network or run code for the
    /// agent (`web_search`, `web_fetch`, `mcp_servers`, code execution; see
    /// [`crate::request_policy`]). Off by default: a `no-network` task's agent would otherwise
    /// browse through its model.
    pub allow_network_tools: bool,
    /// The output tokens a call reserves of the budgets (and is charged when its usage never
    /// arrives) when neither the request (`max_tokens`, ...) nor the price table's
    /// `max_output_tokens` for the model bounds them.
    pub default_max_output_tokens: u64,
    /// The most bytes one trial's record (`calls.jsonl` and the body files) may take; past it
    /// bodies are no longer written and refused calls no longer get a line (their number is
    /// still counted in `usage.json`).
    pub max_recorded_bytes_per_trial: u64,
}

impl BridgeConfig {
    /// A configuration with the given providers, no prices, no job budget and default caps.
    pub fn new(providers: Vec<ProviderConfig>) -> BridgeConfig {
        BridgeConfig {
            providers,
            prices: PriceTable::default(),
            job_budget: Budget::UNLIMITED,
            socket_parent: None,
            max_request_bytes: 32 << 20,
            max_recorded_body_bytes: 64 << 20,
            max_usage_json_bytes: 16 << 20,
            upstream_connect_timeout: Duration::from_secs(30),
            upstream_read_timeout: Duration::from_secs(600),
            close_grace: Duration::from_secs(5),
            max_concurrent_calls_per_trial: 32,
            allow_network_tools: false,
            default_max_output_tokens: 32_768,
            max_recorded_bytes_per_trial: 256 << 20,
        }
    }

    /// OpenAI and Anthropic with keys and base URLs from the runner's environment.
    pub fn from_host_env() -> BridgeConfig {
        BridgeConfig::new(vec![
            ProviderConfig::openai_from_env(),
            ProviderConfig::anthropic_from_env(),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_follow_each_sdk_convention() {
        assert_eq!(
            ApiKind::OpenAi.upstream_url("http://127.0.0.1:9/v1/", Endpoint::ChatCompletions),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(
            ApiKind::Anthropic.upstream_url("http://127.0.0.1:9", Endpoint::Messages),
            "http://127.0.0.1:9/v1/messages"
        );
    }
}
