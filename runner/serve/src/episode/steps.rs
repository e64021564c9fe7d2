//! Multi-step tasks (`[[steps]]`) served as a trial runs them (the engine's
//! `trial/steps.rs`, after Harbor's `MultiStepTrial`): one container for every step; each
//! step is started as in a trial ([`engine::phases::start_step`]: the log directories
//! emptied, its `workdir/` uploaded, its `setup.sh`, its healthcheck) and its instruction is
//! the observation's; `evaluate` verifies the current step only. When the trial's rules go on
//! ([`tasks::steps_rewards::stop_after_step`]: the step has a verifier result that meets its
//! `min_reward`), the next step is prepared and the observation carries its instruction, with
//! `done` false and the verified step's own reward. After the last step, or a step that
//! stops the trial, the episode ends with the trial's reward ([`aggregate`] under the task's
//! `multi_step_reward_strategy`). A next step whose setup fails ends the episode without a
//! trial reward (a 0, as the trial's `agent_error`).
//!
//! The record is a trial's with steps: `steps/<name>/` (`instruction.md`, `verifier/`,
//! `artifacts/`) and `step_results` in `result.json`.

use engine::phases::{NetworkPlan, StepStart, StepStartFailure, record_step_failure, start_step};
use engine::{Backend, PhaseTimeouts, SandboxOf, TrialFailure};
use tasks::records::VerifierResult;
use tasks::steps_rewards::{aggregate, stop_after_step};
use tasks::{ExceptionType, Multipliers};

use super::verify::GradeFailure;
use super::{Episode, StepRecord};
use crate::record::Ending;

impl<B: Backend> Episode<B> {
    /// Starts step `index` for the policy as a trial starts it for its agent
    /// ([`engine::phases::start_step`]): under the step's baseline network, the step's setup
    /// within the task's agent setup deadline; then the step's agent user and agent network.
    pub(super) async fn begin_step(&mut self, index: usize) -> Result<(), TrialFailure> {
        let task = self.task.clone();
        self.step = index;
        let step_dir = self.verification_dir();
        let limit = PhaseTimeouts::resolve(&task.config, &Multipliers::default()).agent_setup;
        let log = self.log.clone();
        let subdirs = ["verifier", "artifacts"];
        let mut side = EpisodeStep(self);
        let started = start_step(&mut side, &task, index, &step_dir, &subdirs, limit, &log);
        let user = started.await.map_err(|failed| match failed {
            // An episode ends either way: the next step cannot be the policy's.
            StepStartFailure::Setup(failure) | StepStartFailure::Runner(failure) => failure,
        })?;
        self.policy.set_user(user);
        self.log.line(&format!(
            "step {}/{}: {} prepared",
            index + 1,
            task.config.steps.len(),
            task.config.steps[index].name
        ));
        Ok(())
    }

    /// After the current step's verification (`verified`): its result recorded; then the
    /// next step begun, or the episode ended (its container removed) with the trial's
    /// verifier result, as a trial's steps end.
    pub async fn step_verified(
        &mut self,
        verified: Result<VerifierResult, GradeFailure>,
    ) -> AfterStep {
        let task = self.task.clone();
        let index = self.step;
        let step = &task.config.steps[index];
        let mut record = StepRecord::new(&step.name);
        match verified {
            Ok(result) => record.verifier_result = Some(result),
            Err(failure) => {
                let kind = failure.kind.unwrap_or(ExceptionType::EnvironmentError);
                record_step_failure(&mut record, &TrialFailure::new(kind, failure.message));
            }
        }
        let stop = stop_after_step(step, &record);
        self.step_results.push(record);
        let mut ending = Ending::default();
        let mut next_failed = None;
        match task.config.steps.get(index + 1).filter(|_| stop.is_none()) {
            Some(next) => match self.begin_step(index + 1).await {
                Ok(()) => return AfterStep::Next(next.name.clone()),
                Err(failure) => {
                    // As in a trial: the failed setup is the next step's failure, without
                    // rewards; it stops the steps and leaves no trial reward.
                    let message = format!("step {:?}: {}", next.name, failure.message);
                    let mut failed = StepRecord::new(&next.name);
                    let failure = TrialFailure::new(failure.kind, message.clone());
                    record_step_failure(&mut failed, &failure);
                    self.step_results.push(failed);
                    ending.error = Some(message.clone());
                    ending.error_type = Some(failure.kind);
                    next_failed = Some(message);
                }
            },
            None => {
                ending.verifier =
                    aggregate(task.config.multi_step_reward_strategy, &self.step_results);
                let last = self.step_results.last();
                if let Some(info) = last.and_then(|s| s.exception_info.clone()) {
                    ending.error = Some(info.exception_message);
                    ending.error_type = Some(info.exception_type);
                }
            }
        }
        ending.step_results = Some(self.step_results.clone());
        self.remove().await;
        match next_failed {
            Some(message) => AfterStep::NextFailed { message, ending },
            None => AfterStep::Ended {
                stopped: stop,
                ending,
            },
        }
    }
}

/// What became of a multi-step episode after a step's verification.
pub enum AfterStep {
    /// The next step (named) was begun: the episode goes on.
    Next(String),
    /// The next step's setup failed (`message`): the episode ended without a trial reward.
    NextFailed { message: String, ending: Ending },
    /// The episode ended after its last step, or one that stops the steps (`stopped`: why).
    Ended {
        stopped: Option<String>,
        ending: Ending,
    },
}

/// What an episode does around a step's start.
struct EpisodeStep<'e, B: Backend>(&'e mut Episode<B>);

impl<B: Backend> StepStart for EpisodeStep<'_, B> {
    type Sandbox = SandboxOf<B>;

    async fn to_setup_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
        self.0
            .set_network(network.agent_baseline, "step's setup")
            .await
    }

    fn setup_sandbox(&mut self) -> Result<Self::Sandbox, TrialFailure> {
        Ok(self.0.policy.sandbox().clone())
    }

    async fn to_agent_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
        // What the step's setup.sh left running (a service) is the task's, not the
        // policy's: later sweeps spare it.
        let spared = self.0.policy.spare_running_processes().await;
        spared.map_err(|e| TrialFailure::new(ExceptionType::EnvironmentError, e.to_string()))?;
        self.0
            .set_network(network.agent_phase, "step's policy")
            .await
    }
}
