//! The host-side LLM bridge: agents in task containers call models without ever holding a
//! provider key.
//!
//! For every trial the runner starts a [`TrialBridge`]: an OpenAI-compatible
//! (`POST /v1/chat/completions`, `POST /v1/responses`, `GET /v1/models`) and
//! Anthropic-compatible (`POST /v1/messages`) HTTP server, streaming and not, on a unix socket
//! of its own. The socket's directory is bind-mounted into the container, where the static
//! `bridge-relay` (shipped in the same directory) listens on `127.0.0.1:<port>` and copies
//! connections to the socket; see ARCHITECTURE.md ("The LLM bridge's transport") for why. The agent gets base URLs pointing at
//! the relay and a per-trial token (`runner-trial-…`) as its API key; the bridge checks the
//! token, the agent phase, the request's fields and tools, the model and the budgets (a hold
//! reserved before forwarding, settled after), swaps the token for the real key, forwards the
//! call, and records and meters it under `<trial>/llm/` (beside `agent/`, out of reach of the
//! agent's own `/logs/agent`). The runner pauses a trial's bridge the moment the agent's
//! command exits ([`TrialBridge::pause`]).
//!
//! # Use
//!
//! ```no_run
//! # async fn job() -> Result<(), llm_bridge::BridgeError> {
//! use llm_bridge::{Bridge, BridgeConfig, Budget, PriceTable, TrialGrant};
//!
//! // Once per job: keys from the host environment (OPENAI_API_KEY, ANTHROPIC_API_KEY) or
//! // key files (KeySource::File), prices from a TOML file, the job budget.
//! let mut config = BridgeConfig::from_host_env();
//! config.prices = PriceTable::load("prices.toml".as_ref()).expect("price table");
//! config.job_budget = Budget { max_tokens: None, max_cost_usd: Some(20.0) };
//! let bridge = Bridge::new(config)?;
//!
//! // Per trial, before the container is created:
//! let mut grant = TrialGrant::new("hello-world__AbCdEf", vec!["openai/gpt-4.1-mini".into()], "jobs/j/hello-world__AbCdEf");
//! grant.budget = Budget { max_tokens: Some(2_000_000), max_cost_usd: None };
//! let trial = bridge.start_trial(grant).await?;
//! // bind-mount trial.socket_dir() at llm_bridge::CONTAINER_BRIDGE_DIR (read-only is fine),
//! // exec trial.relay_serve_command() detached, then trial.relay_wait_command(5000),
//! // and give the agent trial.agent_env().
//! // ... the agent runs ...
//! trial.pause(); // the agent's command exited: no more calls are forwarded
//! let usage = trial.close().await?; // token revoked; llm/usage.json written
//! // usage.fill_agent_context(&mut trial_result.agent_result) ; job totals: bridge.job_usage()
//! if bridge.job_budget_exhausted() { /* schedule no more trials */ }
//! # Ok(()) }
//! ```

mod bridge;
mod call;
pub mod config;
pub mod config_file;
mod error;
mod forward;
mod in_flight;
mod ledger;
mod model_bridge;
pub mod policy;
pub mod prices;
pub mod record;
pub mod redact;
pub mod request_policy;
mod server;
pub mod sse;
pub mod summary;
pub mod token;
mod trial;
pub mod usage;
pub mod wire_error;

pub use bridge::{Bridge, CONTAINER_BRIDGE_DIR, DEFAULT_RELAY_PORT, SOCKET_FILE_NAME, TrialGrant};
/// The in-container relay (its own crate, `runner/bridge-relay`, which the engine's egress proxy uses
/// too).
pub use bridge_relay as relay;
pub use bridge_relay::{
    RELAY_BINARY, RELAY_FILE_NAME, relay_serve_command, relay_wait_command, write_relay,
};
pub use config::{ApiKind, BridgeConfig, Budget, KeySource, ProviderConfig};
pub use config_file::{LlmConfigError, LlmConfigFile};
pub use error::{BridgeError, ModelKeyError};
pub use model_bridge::JobModelBridge;
pub use prices::{ModelPrice, PriceTable, PriceTableError};
pub use record::{CallOutcome, CallRecord};
pub use summary::{JobUsage, TrialUsage};
pub use token::{TOKEN_PREFIX, is_trial_token_shaped};
pub use trial::TrialBridge;
pub use usage::Usage;
