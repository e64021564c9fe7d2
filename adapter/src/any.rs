//! [`AnyAgent`]: every agent the runner can drive, as one type.
//!
//! The trial engine is generic over its backend only; which agent runs is a value chosen on
//! the command line, so the engine is compiled once rather than once per agent type.

use tasks::Sandbox;
use tasks::records::AgentConfig;

use crate::agent::{Agent, AgentError, AgentRun, AgentRunReport, HostMount};
use crate::{CommandAgent, InstalledAgent, NopAgent, OracleAgent};

/// The names `--agent` accepts for built-in agents.
pub const BUILTIN_AGENTS: &[&str] = &["oracle", "nop"];

/// One of the runner's agents: a built-in one, or an installed or command-style agent from a
/// config file.
#[derive(Debug)]
pub enum AnyAgent {
    /// Runs the task's reference solution.
    Oracle(OracleAgent),
    /// Does nothing: the baseline every task should fail.
    Nop(NopAgent),
    /// An agent installed into each container and driven through its task API.
    Installed(Box<InstalledAgent>),
    /// An agent installed into each container and run as one command per trial.
    Command(Box<CommandAgent>),
}

impl AnyAgent {
    /// The built-in agent called `name`, or `None` when there is none of that name (see
    /// [`BUILTIN_AGENTS`]).
    pub fn builtin(name: &str) -> Option<AnyAgent> {
        match name {
            "oracle" => Some(AnyAgent::Oracle(OracleAgent)),
            "nop" => Some(AnyAgent::Nop(NopAgent)),
            _ => None,
        }
    }
}

impl AnyAgent {
    /// Fetches what the agent prepares on the host (once, into runner's cache) before any
    /// trial; nothing for agents that prepare nothing.
    pub fn prepare_host_files(
        &self,
        progress: &dyn Fn(&str),
    ) -> Result<(), crate::command::prepare::PrepareError> {
        match self {
            AnyAgent::Command(agent) => agent.prepare_host_files(progress),
            _ => Ok(()),
        }
    }
}

impl From<InstalledAgent> for AnyAgent {
    fn from(agent: InstalledAgent) -> Self {
        AnyAgent::Installed(Box::new(agent))
    }
}

impl From<CommandAgent> for AnyAgent {
    fn from(agent: CommandAgent) -> Self {
        AnyAgent::Command(Box::new(agent))
    }
}

/// Forwards a call to whichever agent this is.
macro_rules! dispatch {
    ($self:ident, $agent:ident => $call:expr) => {
        match $self {
            AnyAgent::Oracle($agent) => $call,
            AnyAgent::Nop($agent) => $call,
            AnyAgent::Installed($agent) => $call,
            AnyAgent::Command($agent) => $call,
        }
    };
}

impl Agent for AnyAgent {
    fn name(&self) -> &str {
        dispatch!(self, agent => agent.name())
    }

    fn version(&self) -> String {
        dispatch!(self, agent => agent.version())
    }

    fn model_name(&self) -> Option<String> {
        dispatch!(self, agent => agent.model_name())
    }

    fn declared_models(&self) -> Vec<String> {
        dispatch!(self, agent => agent.declared_models())
    }

    fn job_config(&self) -> AgentConfig {
        dispatch!(self, agent => agent.job_config())
    }

    fn instruction_suffix(&self) -> Option<&str> {
        dispatch!(self, agent => agent.instruction_suffix())
    }

    fn host_mounts(&self) -> Vec<HostMount> {
        dispatch!(self, agent => agent.host_mounts())
    }

    async fn setup<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<Option<String>, AgentError> {
        dispatch!(self, agent => agent.setup(sandbox, run).await)
    }

    async fn run<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        instruction: &str,
    ) -> Result<AgentRunReport, AgentError> {
        dispatch!(self, agent => agent.run(sandbox, run, instruction).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_agents_describe_their_job_config_entry() {
        for name in BUILTIN_AGENTS {
            let agent = AnyAgent::builtin(name).expect("a built-in agent");
            assert_eq!(agent.name(), *name);
            let entry = agent.job_config();
            assert_eq!(entry.name.as_deref(), Some(*name));
            assert_eq!(entry.model_name, None);
            assert_eq!(agent.instruction_suffix(), None);
        }
        assert!(AnyAgent::builtin("claude-code").is_none());
    }
}
