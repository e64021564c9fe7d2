//! One client's episode as OpenEnv sees it: the Terminal-Bench wrapper's observation, reward
//! and `done` for each action, and the episode's state (`/state`). The episode (`episode/`)
//! runs the container and the trial's phases; a session turns what they did into replies:
//! the policy's actions into their observations, `evaluate` into the verifier's output, its
//! details and the reward (a multi-step task's: the step's, then the trial's).

use std::collections::BTreeMap;
use std::path::Path;

use engine::Backend;
use serde_json::{Map, Value, json};
use tasks::records::VerifierResult;

use crate::actions::Broken;
use crate::episode::{AfterStep, Episode, GradeFailure, Graded};
use crate::output::cut;
use crate::protocol::{Action, ActionKind, EpisodeState, Observation, StepResult};
use crate::record::Ending;

/// A client's running episode and its state.
pub struct Session<B: Backend> {
    episode: Episode<B>,
    state: EpisodeState,
}

impl<B: Backend> Session<B> {
    /// The session of a started `episode`, named `episode_id` (the client's, or the name).
    pub fn new(episode: Episode<B>, episode_id: String) -> Self {
        let state = EpisodeState {
            episode_id: Some(episode_id),
            task_id: episode.task().name.clone(),
            task_path: episode.task().dir.display().to_string(),
            terminal_ready: true,
            ..EpisodeState::default()
        };
        Self { episode, state }
    }

    /// The episode.
    pub fn episode(&self) -> &Episode<B> {
        &self.episode
    }

    /// The episode's state.
    pub fn state(&self) -> &EpisodeState {
        &self.state
    }

    /// Removes the episode's container (idempotent).
    pub async fn remove(&mut self) {
        self.state.terminal_ready = false;
        self.episode.remove().await;
    }

    /// The first observation (the instruction).
    pub fn first_observation(&self) -> StepResult {
        let mut observation = self.observation("reset");
        observation.metadata = self.step_metadata();
        reply(observation, Some(0.0), false)
    }

    fn observation(&self, action_type: &str) -> Observation {
        Observation::new(
            &self.state.task_id,
            &self.state.task_path,
            self.episode.instruction(),
            action_type,
        )
    }

    /// What the observations of a multi-step episode say of its steps in `metadata`: the
    /// current step's name, index (from 0) and the number of steps. Empty for a single-step
    /// task.
    fn step_metadata(&self) -> Map<String, Value> {
        let mut metadata = Map::new();
        if let Some(index) = self.episode.current_step() {
            let steps = &self.episode.task().config.steps;
            metadata.insert("step".into(), json!(steps[index].name));
            metadata.insert("step_index".into(), json!(index));
            metadata.insert("steps_total".into(), json!(steps.len()));
        }
        metadata
    }

    /// Carries out one action. The episode's `Ending` is returned once it ends (evaluate,
    /// close, or a container that no longer answers).
    pub async fn step(&mut self, action: &Action, backend: &B) -> (StepResult, Option<Ending>) {
        self.state.step_count += 1;
        self.state.last_action_type = action.action_type.clone();
        self.state.last_command = action.command.clone();
        if let Some(id) = &action.session_id {
            self.state.session_id = id.clone();
        }
        let mut obs = self.observation(&action.action_type);
        obs.session_id = action.session_id.clone();
        if !self.episode.is_live() {
            let obs = obs.failed("the episode has ended; reset to start another");
            return (reply(obs, None, true), None);
        }
        let Some(kind) = ActionKind::parse(&action.action_type) else {
            let obs = obs.failed(format!(
                "unsupported action_type {:?} (exec, write, view, wait, kill, write_file, evaluate, close)",
                action.action_type
            ));
            return (reply(obs, None, false), None);
        };
        let outcome = match kind {
            ActionKind::Evaluate => return self.evaluate(obs, backend).await,
            ActionKind::Close => {
                obs.output = "Closed the episode and removed its container.".into();
                let why = "closed by the policy before evaluate".into();
                return self.end(obs, why, None).await;
            }
            policy => self.episode.act(policy, action, obs).await,
        };
        if let Some(message) = self.episode.storage_exceeded() {
            let obs = self.observation(&action.action_type).failed(&message);
            let kind = tasks::ExceptionType::StorageLimitExceededError;
            return self.end(obs, message, Some(kind)).await;
        }
        match outcome {
            Ok(obs) => {
                self.state.last_output = obs.output.clone();
                (reply(obs, None, false), None)
            }
            Err(Broken(message)) => {
                // The container no longer answers: the episode is over.
                let obs = self.observation(&action.action_type).failed(format!(
                    "the environment failed: {message}; the episode is closed"
                ));
                self.end(obs, message, None).await
            }
        }
    }

    /// Ends the episode before evaluate: its container removed, `error` its record's.
    async fn end(
        &mut self,
        obs: Observation,
        error: String,
        error_type: Option<tasks::ExceptionType>,
    ) -> (StepResult, Option<Ending>) {
        self.remove().await;
        let ending = Ending {
            error: Some(error),
            error_type,
            ..Ending::default()
        };
        (reply(obs, None, true), Some(ending))
    }

    /// Kills every process of the policy and runs the verifier of the task (or of the
    /// current step) as a trial does. A single-step episode ends with its reward; a
    /// multi-step one goes on to the next step or ends as a trial's steps would.
    async fn evaluate(&mut self, obs: Observation, backend: &B) -> (StepResult, Option<Ending>) {
        let out_dir = self.episode.verification_dir();
        let graded = self.episode.grade(backend).await;
        if self.episode.current_step().is_some() {
            return self.step_evaluated(graded, &out_dir, obs).await;
        }
        let mut obs = obs;
        // Where a single-step task verifies, as a trial records it.
        let mode = engine::phases::trial_verifier_mode(self.episode.task());
        let mut ending = Ending {
            verifier_environment_mode: mode.map(str::to_owned),
            ..Ending::default()
        };
        match graded {
            Ok(graded) => {
                let (reward, details) = self.show(&mut obs, &graded, &out_dir);
                obs.metadata = details;
                ending.reward = Some(reward);
                ending.verifier = Some(graded.result);
            }
            Err(failure) => {
                obs = obs.failed(format!("the verifier failed: {}", failure.message));
                ending.error = Some(failure.message);
                ending.error_type = failure.kind;
            }
        }
        self.remove().await;
        (reply(obs, ending.reward, true), Some(ending))
    }

    /// After a step's verification (`graded`, its outputs in `out_dir`): the step's reward
    /// and the next step's instruction, or the end of the episode with the trial's reward.
    async fn step_evaluated(
        &mut self,
        graded: Result<Graded, GradeFailure>,
        out_dir: &Path,
        mut obs: Observation,
    ) -> (StepResult, Option<Ending>) {
        let mut details = Map::new();
        let (step_reward, verified) = match graded {
            Ok(graded) => {
                let (reward, _) = self.show(&mut obs, &graded, out_dir);
                details = std::mem::take(&mut obs.info);
                (reward, Ok(graded.result))
            }
            Err(failure) => {
                let index = self.episode.current_step().unwrap_or_default();
                let name = &self.episode.task().config.steps[index].name;
                obs = obs.failed(format!(
                    "the verifier of step {name:?} failed: {}",
                    failure.message
                ));
                (0.0, Err(failure))
            }
        };
        details.extend(self.step_metadata());
        details.insert("step_reward".into(), json!(step_reward));
        let mut ending = match self.episode.step_verified(verified).await {
            AfterStep::Next(next) => {
                obs.instruction = self.episode.instruction().to_owned();
                details.insert("next_step".into(), json!(next));
                obs.info = details.clone();
                obs.metadata = details;
                return (reply(obs, Some(step_reward), false), None);
            }
            AfterStep::NextFailed { message, ending } => {
                details.insert("stopped".into(), json!(message));
                obs = obs.failed(message);
                ending
            }
            AfterStep::Ended { stopped, ending } => {
                if let Some(reason) = stopped {
                    details.insert("stopped".into(), json!(reason));
                }
                ending
            }
        };
        self.state.terminal_ready = false;
        let reward = headline_reward(ending.verifier.as_ref().and_then(|v| v.rewards.as_ref()));
        let steps = ending.step_results.as_deref().unwrap_or_default();
        let rewards: Vec<f64> = steps.iter().map(|s| headline_reward(s.rewards())).collect();
        details.insert("step_rewards".into(), json!(rewards));
        details.insert("trial_reward".into(), json!(reward));
        obs.info = details.clone();
        obs.metadata = details;
        ending.reward = Some(reward);
        (reply(obs, Some(reward), true), Some(ending))
    }

    /// Shows a verification that ran in `obs`: the tests' output the verifier brought back
    /// into `out_dir` as its output, and in its `info` the details ([`grade_details`]) with
    /// whether that output was cut. Returns the reward and the details (without the cut's,
    /// which only `info` carries).
    fn show(
        &self,
        obs: &mut Observation,
        graded: &Graded,
        out_dir: &Path,
    ) -> (f64, Map<String, Value>) {
        let reward = headline_reward(graded.result.rewards.as_ref());
        let details = grade_details(&graded.result, graded.leftovers, reward);
        let shown = read_test_output(out_dir, self.episode.config().max_output_bytes);
        obs.output = shown.text;
        obs.info = details.clone();
        obs.info.insert("truncated".into(), json!(shown.truncated));
        obs.info
            .insert("bytes_dropped".into(), json!(shown.dropped));
        (reward, details)
    }
}

fn reply(observation: Observation, reward: Option<f64>, done: bool) -> StepResult {
    StepResult {
        observation,
        reward,
        done,
    }
}

/// The reward of an evaluation: the `reward` key, else the mean of the rewards, else 0.
pub fn headline_reward(rewards: Option<&BTreeMap<String, f64>>) -> f64 {
    let Some(rewards) = rewards.filter(|r| !r.is_empty()) else {
        return 0.0;
    };
    match rewards.get("reward") {
        Some(reward) => *reward,
        None => rewards.values().sum::<f64>() / rewards.len() as f64,
    }
}

/// What an evaluate observation's `info` and `metadata` carry: the verifier's rewards,
/// exit code, named checks with `assertions_passed`/`assertions_total`, and how many
/// processes the policy had left.
fn grade_details(result: &VerifierResult, leftovers: usize, reward: f64) -> Map<String, Value> {
    let mut details = Map::new();
    details.insert("tests_passed".into(), json!(reward >= 1.0));
    details.insert("exit_code".into(), json!(result.test_exit_code));
    details.insert("rewards".into(), json!(result.rewards));
    if let Some(checks) = &result.checks {
        details.insert("checks".into(), json!(checks));
    }
    details.insert("assertions_passed".into(), json!(result.assertions_passed));
    details.insert("assertions_total".into(), json!(result.assertions_total));
    details.insert("leftover_processes".into(), json!(leftovers));
    details
}

/// The tests' output the verifier brought back into `dir`, cut to `max` bytes.
fn read_test_output(dir: &Path, max: usize) -> crate::output::Cut {
    let path = dir.join("verifier").join("test-stdout.txt");
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    cut(&text, max, text.len(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reward_is_the_reward_key_else_the_mean() {
        let mut rewards = BTreeMap::new();
        assert_eq!(headline_reward(None), 0.0);
        assert_eq!(headline_reward(Some(&rewards)), 0.0);
        rewards.insert("a".to_owned(), 1.0);
        rewards.insert("b".to_owned(), 0.0);
        assert_eq!(headline_reward(Some(&rewards)), 0.5);
        rewards.insert("reward".to_owned(), 1.0);
        assert_eq!(headline_reward(Some(&rewards)), 1.0);
    }
}
