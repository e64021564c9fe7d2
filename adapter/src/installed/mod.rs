//! Installed agents: source upload with provenance, in-container server, task API, ATIF traces.

mod config;
mod installed_agent;
pub mod server;
pub mod task_api;
pub mod task_extras;
pub mod trajectory;
pub mod transport;
pub(crate) mod trial_files;

pub use config::is_env_name;
pub use config::{
    AgentConfigError, ApiSection, InstallSection, InstalledAgentConfig, ServerSection,
    SourceSection, TracesSection, TrajectoryFormat, TrajectorySection,
};
pub(crate) use config::{check_identity, deserialize_toml, read_config};
pub use installed_agent::InstalledAgent;
