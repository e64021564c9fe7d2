//! The agent phases: setup (install) under Harbor's setup deadline, then the run under the
//! task's agent deadline.

use std::time::{Duration, Instant};

use adapter::{Agent, AgentRun};
use tasks::ExceptionType;

use super::Trial;
use super::record::{finish_timing, start_timing};
use crate::backend::Backend;
use crate::events::Phase;
use crate::failure::TrialFailure;

/// How long past the agent deadline the runner waits for an agent that does not stop itself.
pub(super) const RUN_BACKSTOP: Duration = Duration::from_secs(60);
/// The host's deadline for an agent whose task sets none (Harbor 0.13: no timeout): the
/// longest timeout a task may set, so even such a trial cannot hang the job forever.
const UNBOUNDED_AGENT_BACKSTOP: Duration =
    Duration::from_secs(tasks::limits::MAX_TIMEOUT_SEC as u64);

impl<B: Backend> Trial<B> {
    fn agent_run_context(&self) -> AgentRun<'_> {
        AgentRun {
            task: &self.plan.task,
            trial_dir: self.dir.clone(),
            user: self
                .plan
                .task
                .config
                .agent
                .user
                .as_ref()
                .map(|u| u.as_exec_user()),
            setup_deadline: deadline_after(self.timeouts.agent_setup),
            run_deadline: None,
            agent_timeout_sec: self.timeouts.agent.map(|d| d.as_secs_f64()),
        }
    }

    /// Installs the agent; records the version it reports.
    pub(super) async fn agent_setup(&mut self) -> Result<(), TrialFailure> {
        self.enter(Phase::AgentSetup);
        let sandbox = self.sandbox()?;
        let limit = self.timeouts.agent_setup;
        start_timing(&mut self.result.agent_setup);
        let run = self.agent_run_context();
        let setup = tokio::time::timeout(limit, self.ctx.agent.setup(&sandbox, &run)).await;
        finish_timing(&mut self.result.agent_setup);
        match setup {
            Ok(Ok(version)) => {
                if let Some(version) = version {
                    self.result.agent_info.version = version;
                }
                Ok(())
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(TrialFailure::new(
                ExceptionType::AgentSetupTimeoutError,
                format!(
                    "Agent setup timed out after {} seconds",
                    limit.as_secs_f64()
                ),
            )),
        }
    }

    /// Runs the agent on the instruction. The agent enforces its own deadline (so it can
    /// cancel its work); a host timeout behind it catches an agent that does not. A timeout or
    /// a failed agent is recorded and the trial goes on to verification, as in Harbor.
    pub(super) async fn agent_run(&mut self) -> Result<(), TrialFailure> {
        self.enter(Phase::Agent);
        let sandbox = self.sandbox()?;
        let agent_timeout = self.timeouts.agent;
        // The agent's phase network first, so the switch costs none of its deadline.
        let network = self.network_plan();
        self.switch_network("agent run", network.agent_baseline, network.agent_phase)
            .await?;
        start_timing(&mut self.result.agent_execution);
        let run = AgentRun {
            run_deadline: agent_timeout.map(deadline_after),
            ..self.agent_run_context()
        };
        let backstop =
            agent_timeout.map_or(UNBOUNDED_AGENT_BACKSTOP, |d| d.saturating_add(RUN_BACKSTOP));
        let instruction = &self.plan.task.instruction;
        let outcome =
            tokio::time::timeout(backstop, self.ctx.agent.run(&sandbox, &run, instruction)).await;
        finish_timing(&mut self.result.agent_execution);
        let failure = match outcome {
            Ok(Ok(report)) => {
                self.result.agent_result = report.context;
                None
            }
            Ok(Err(e)) => Some(TrialFailure::from(e)),
            Err(_) => Some(TrialFailure::new(
                ExceptionType::AgentTimeoutError,
                format!(
                    "Agent execution timed out after {} seconds",
                    agent_timeout.unwrap_or_default().as_secs_f64()
                ),
            )),
        };
        if let Some(failure) = failure {
            if !failure.continues_to_verification() {
                return Err(failure);
            }
            self.log.line("the agent failed; verification still runs");
            self.fail(failure);
        }
        self.switch_network(
            "rest of the trial",
            network.agent_phase,
            network.agent_baseline,
        )
        .await?;
        self.collect("/logs/agent", "agent").await;
        Ok(())
    }
}

/// `now + limit`, or a far-off instant when the sum is not representable.
fn deadline_after(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(10 * 365 * 24 * 3600))
}
