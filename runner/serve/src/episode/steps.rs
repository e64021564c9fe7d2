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
use serde_json::{Map, json};
use tasks::steps_rewards::{aggregate, stop_after_step};
use tasks::{ExceptionType, Multipliers};

use super::verify::{GradeFailure, Graded};
use super::{Ending, Episode, StepRecord, grade_details, headline_reward, read_test_output};
use crate::protocol::{Observation, StepResult};

impl<B: Backend> Episode<B> {
    /// What the observations of a multi-step episode say of its steps in `metadata`: the
    /// current step's name, index (from 0) and the number of steps. Empty for a single-step
    /// task.
    pub(super) fn step_metadata(&self) -> Map<String, serde_json::Value> {
        let mut metadata = Map::new();
        if let Some(index) = self.current_step() {
            let steps = &self.task.config.steps;
            metadata.insert("step".into(), json!(steps[index].name));
            metadata.insert("step_index".into(), json!(index));
            metadata.insert("steps_total".into(), json!(steps.len()));
        }
        metadata
    }

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

    /// After the current step's verification (`graded`): its result recorded; then the next
    /// step, or the end of the episode with the trial's reward.
    pub(super) async fn step_evaluated(
        &mut self,
        graded: Result<Graded, GradeFailure>,
        mut obs: Observation,
    ) -> (StepResult, Option<Ending>) {
        let task = self.task.clone();
        let index = self.step;
        let step = &task.config.steps[index];
        let mut record = StepRecord::new(&step.name);
        let mut details = Map::new();
        match graded {
            Ok(graded) => {
                let reward = headline_reward(graded.result.rewards.as_ref());
                details = grade_details(&graded, reward);
                let shown =
                    read_test_output(&self.verification_dir(), self.config.max_output_bytes);
                obs.output = shown.text;
                details.insert("truncated".into(), json!(shown.truncated));
                details.insert("bytes_dropped".into(), json!(shown.dropped));
                record.verifier_result = Some(graded.result);
            }
            Err(failure) => {
                obs = obs.failed(format!(
                    "the verifier of step {:?} failed: {}",
                    step.name, failure.message
                ));
                let kind = failure.kind.unwrap_or(ExceptionType::EnvironmentError);
                record_step_failure(&mut record, &TrialFailure::new(kind, failure.message));
            }
        }
        let step_reward = headline_reward(record.rewards());
        details.extend(self.step_metadata());
        details.insert("step_reward".into(), json!(step_reward));
        let stop = stop_after_step(step, &record);
        self.step_results.push(record);
        let mut ending = Ending::default();
        match (&stop, task.config.steps.get(index + 1)) {
            (None, Some(next)) => match self.begin_step(index + 1).await {
                Ok(()) => {
                    obs.instruction = self.instruction().to_owned();
                    details.insert("next_step".into(), json!(next.name));
                    obs.info = details.clone();
                    obs.metadata = details;
                    return (self.result(obs, Some(step_reward), false), None);
                }
                Err(failure) => {
                    // As in a trial: the failed setup is the next step's failure, without
                    // rewards; it stops the steps and leaves no trial reward.
                    let message = format!("step {:?}: {}", next.name, failure.message);
                    let mut failed = StepRecord::new(&next.name);
                    record_step_failure(
                        &mut failed,
                        &TrialFailure::new(failure.kind.clone(), message.clone()),
                    );
                    self.step_results.push(failed);
                    details.insert("stopped".into(), json!(message));
                    obs = obs.failed(message.clone());
                    ending.error = Some(message);
                    ending.error_type = Some(failure.kind);
                }
            },
            _ => {
                if let Some(reason) = &stop {
                    details.insert("stopped".into(), json!(reason));
                }
                ending.verifier =
                    aggregate(task.config.multi_step_reward_strategy, &self.step_results);
                if let Some(info) = self
                    .step_results
                    .last()
                    .and_then(|s| s.exception_info.clone())
                {
                    ending.error = Some(info.exception_message);
                    ending.error_type = Some(info.exception_type);
                }
            }
        }
        let reward = headline_reward(ending.verifier.as_ref().and_then(|v| v.rewards.as_ref()));
        let rewards: Vec<f64> = self
            .step_results
            .iter()
            .map(|s| headline_reward(s.rewards()))
            .collect();
        details.insert("step_rewards".into(), json!(rewards));
        details.insert("trial_reward".into(), json!(reward));
        obs.info = details.clone();
        obs.metadata = details;
        ending.reward = Some(reward);
        ending.step_results = Some(self.step_results.clone());
        self.remove().await;
        (self.result(obs, Some(reward), true), Some(ending))
    }
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
