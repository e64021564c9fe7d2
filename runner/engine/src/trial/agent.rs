//! The agent phases: setup (install) under Harbor's setup deadline, then the run under the
//! task's agent deadline.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use adapter::{Agent, AgentRun};
use tasks::ExceptionType;
use tasks::records::AgentContext;

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

/// What one agent run is for: the task's instruction, or one step's (a multi-step task runs
/// the agent once per step, after one setup).
pub(super) struct AgentTurn<'a> {
    /// The instruction sent.
    pub instruction: &'a str,
    /// The step's name, for a multi-step task.
    pub step: Option<String>,
    /// The run's deadline.
    pub timeout: Option<Duration>,
    /// The user the agent runs as.
    pub user: Option<String>,
    /// Where the agent writes `agent/...` and `/logs/agent` is collected: the trial dir, or
    /// the step's `steps/<name>/`.
    pub records_dir: PathBuf,
    /// Told when the agent's command has ended, before `/logs/agent` is collected (the
    /// storage watch's last look of the run starts then).
    pub command_ended: Option<tokio::sync::oneshot::Sender<()>>,
}

/// How one agent run ended.
pub(super) struct AgentTurnOutcome {
    /// What the agent reported.
    pub context: Option<AgentContext>,
    /// Why it failed, if it did.
    pub failure: Option<TrialFailure>,
}

impl<B: Backend> Trial<B> {
    /// The job's `override_error_policy` (each trial's config carries it).
    pub(super) fn overrides(&self) -> &tasks::error_policy::ErrorPolicyOverrides {
        &self.plan.config.harbor_026.override_error_policy
    }

    /// Says in trial.log when an agent failure runner would verify after is not verified
    /// because the job's `override_error_policy` says `should_grade: false` for its type.
    pub(super) fn log_not_graded(&self, failure: &TrialFailure) {
        if crate::error_overrides::GRADED_AFTER_BY_DEFAULT.contains(&failure.kind) {
            self.log.line(&format!(
                "the agent failed ({}); not verified: override_error_policy.{}.should_grade is false",
                failure.kind, failure.kind
            ));
        }
    }

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
            step: None,
            end_turn: None,
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
    pub(super) async fn agent_run(
        &mut self,
        command_ended: tokio::sync::oneshot::Sender<()>,
    ) -> Result<(), TrialFailure> {
        let task = self.plan.task.clone();
        // The agent's phase network first, so the switch costs none of its deadline.
        let network = self.network_plan();
        self.switch_network("agent run", network.agent_baseline, network.agent_phase)
            .await?;
        self.egress_phase(super::egress::EgressPhase::Agent).await?;
        let turn = AgentTurn {
            instruction: &task.instruction,
            step: None,
            timeout: self.timeouts.agent,
            user: self.agent_run_context().user,
            records_dir: self.dir.clone(),
            command_ended: Some(command_ended),
        };
        start_timing(&mut self.result.agent_execution);
        let ran = self.agent_turn(turn).await;
        finish_timing(&mut self.result.agent_execution);
        let ran = ran?;
        // As Harbor 0.26 records it: every agent that ran has an agent_result, its counts null
        // where the agent (and the bridge) said nothing.
        let failed_with = ran
            .failure
            .as_ref()
            .and_then(|f| f.agent_context.as_deref());
        let context = ran.context.clone().or_else(|| failed_with.cloned());
        self.result.agent_result = Some(context.unwrap_or_default());
        if let Some(failure) = ran.failure {
            if !failure.continues_to_verification(self.overrides()) {
                self.log_not_graded(&failure);
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
        // Until the verifier's phase, what the agent left running has the baseline's network.
        self.egress_policy(super::egress::EgressPhase::Setup)?;
        Ok(())
    }

    /// One agent run of `turn` under its deadline (the agent's own, and the host's backstop
    /// behind it). Unless it failed in a way Harbor does not verify after, `/logs/agent` is
    /// then collected into the turn's records dir.
    pub(super) async fn agent_turn(
        &mut self,
        turn: AgentTurn<'_>,
    ) -> Result<AgentTurnOutcome, TrialFailure> {
        self.enter(Phase::Agent);
        let sandbox = self.sandbox()?;
        // The LLM bridge serves this turn only: from the agent's start until its command
        // exits, which the agent says in the container's own shell (`end_turn_command`) and
        // on the host as soon as its run ends; the pause below covers an agent that says
        // neither. So no process the agent leaves behind reaches the provider afterwards.
        let bridge = self.bridge.grant.as_ref();
        let end_turn_shell = bridge.map(|b| b.end_turn_command()).unwrap_or_default();
        let pause = || {
            if let Some(bridge) = bridge {
                bridge.pause();
            }
        };
        let run = AgentRun {
            run_deadline: turn.timeout.map(deadline_after),
            agent_timeout_sec: turn.timeout.map(|d| d.as_secs_f64()),
            trial_dir: turn.records_dir.clone(),
            user: turn.user.clone(),
            step: turn.step.clone(),
            end_turn: bridge.map(|_| adapter::EndTurn {
                in_container: &end_turn_shell,
                on_host: &pause,
            }),
            ..self.agent_run_context()
        };
        let backstop = turn
            .timeout
            .map_or(UNBOUNDED_AGENT_BACKSTOP, |d| d.saturating_add(RUN_BACKSTOP));
        if let Some(bridge) = bridge {
            bridge.resume();
        }
        let outcome = tokio::time::timeout(
            backstop,
            self.ctx.agent.run(&sandbox, &run, turn.instruction),
        )
        .await;
        pause();
        if let Some(ended) = turn.command_ended {
            let _ = ended.send(());
        }
        let (context, failure) = match outcome {
            Ok(Ok(report)) => (report.context, None),
            Ok(Err(e)) => (None, Some(TrialFailure::from(e))),
            Err(_) => (
                None,
                Some(TrialFailure::new(
                    ExceptionType::AgentTimeoutError,
                    format!(
                        "Agent execution timed out after {} seconds",
                        turn.timeout.unwrap_or_default().as_secs_f64()
                    ),
                )),
            ),
        };
        if failure
            .as_ref()
            .is_none_or(|f| f.continues_to_verification(self.overrides()))
        {
            self.collect_into("/logs/agent", &turn.records_dir.join("agent"))
                .await;
        }
        Ok(AgentTurnOutcome { context, failure })
    }
}

/// `now + limit`, or a far-off instant when the sum is not representable.
fn deadline_after(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(10 * 365 * 24 * 3600))
}
