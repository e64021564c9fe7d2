//! Agents: the built-in `oracle` and `nop`, installed agents driven through their in-container
//! task API, and command-style agents run as one command per trial. The runner drives every agent through the [`Agent`] trait.

mod agent;
mod any;
pub mod catalogue;
pub mod command;
mod file_agent;
pub mod installed;
mod nop;
mod oracle;
pub mod secrets;

pub use agent::{Agent, AgentError, AgentErrorKind, AgentRun, AgentRunReport, EndTurn, HostMount};
pub use any::{AnyAgent, BUILTIN_AGENTS};
pub use command::{AgentConfigFile, CommandAgent, CommandAgentConfig, CommandAgentOptions};
pub use installed::{AgentConfigError, InstalledAgent, InstalledAgentConfig};
pub use nop::NopAgent;
pub use oracle::OracleAgent;
