//! `nop`: does nothing, the "do nothing" baseline every task should fail.

use tasks::Sandbox;

use crate::agent::{Agent, AgentError, AgentRun, AgentRunReport};

/// The agent that does nothing.
#[derive(Debug, Default)]
pub struct NopAgent;

impl Agent for NopAgent {
    fn name(&self) -> &str {
        "nop"
    }

    fn version(&self) -> String {
        "1.0.0".into()
    }

    async fn run<S: Sandbox>(
        &self,
        _sandbox: &S,
        _run: &AgentRun<'_>,
        _instruction: &str,
    ) -> Result<AgentRunReport, AgentError> {
        Ok(AgentRunReport::default())
    }
}
