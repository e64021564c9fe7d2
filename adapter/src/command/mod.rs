//! Command-style agents: install commands, then one run command per trial with the
//! instruction, the workdir, the model and kwargs filled into its placeholders, run under the
//! agent deadline; its output and the trace files it names are collected and converted to ATIF.

mod agent;
pub mod claude_code;
pub mod codex;
mod config;
pub mod deadline;
pub mod host_index;
pub mod mini_swe;
pub mod prepare;
mod run;
pub mod session_log;
pub mod template;
mod trace_pattern;

pub use agent::{CommandAgent, CommandAgentOptions};
pub use config::{
    AgentConfigFile, CommandAgentConfig, CommandInstallSection, CommandTrajectoryFormat,
    CommandTrajectorySection, RunSection,
};
