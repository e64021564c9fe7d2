//! Episodes recorded like trials: `<job>/<episode>/result.json` (a trial's record, with the
//! verifier's result and reward), `agent/trajectory.json` (the actions and observations as
//! ATIF) and `verifier/` (what the task's verifier wrote), so `runner view` and `summary`
//! read a served job as they read a run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use engine::OutputSink;
use serde_json::{Map, Value};
use tasks::atif::{
    Agent, Content, Observation as AtifObservation, ObservationResult, Step, StepSource, ToolCall,
    Trajectory,
};
use tasks::records::{
    AgentInfo, ExceptionInfo, StepResult as StepRecord, TrialResult, VerifierResult,
};
use tasks::{ExceptionType, Task};

use crate::error::ServeError;
use crate::protocol::{Action, EpisodeState, StepResult};

/// The name episodes record as their agent.
pub const POLICY_NAME: &str = "openenv-policy";

/// What an episode learnt once it ended, for its record.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// The verifier's result, when evaluate ran it.
    pub verifier: Option<VerifierResult>,
    /// The reward evaluate gave.
    pub reward: Option<f64>,
    /// Why it ended without a reward (an error, the idle timeout, a close).
    pub error: Option<String>,
    /// The exception type of that error, when it was the verifier's.
    pub error_type: Option<tasks::ExceptionType>,
    /// Where the (last) verification ran: `shared` or `separate`; `None` for a multi-step
    /// task, whose steps each verify where their own verifier does (as in a trial record).
    pub verifier_environment_mode: Option<String>,
    /// The verified steps of a multi-step task, as a trial records them.
    pub step_results: Option<Vec<StepRecord>>,
}

/// The record of one episode, written as it ends.
pub struct Recorder {
    dir: PathBuf,
    trajectory: Trajectory,
    result: TrialResult,
    finished: bool,
}

impl Recorder {
    /// Opens the record of an episode of `task` in `dir` (made here).
    pub fn open(
        dir: &Path,
        task: &Task,
        episode_id: &str,
        number: u64,
    ) -> Result<Self, ServeError> {
        let agent_dir = dir.join("agent");
        std::fs::create_dir_all(&agent_dir).map_err(|source| ServeError::Record {
            path: agent_dir.clone(),
            source,
        })?;
        let agent = Agent {
            name: POLICY_NAME.into(),
            version: "1".into(),
            model_name: None,
            tool_definitions: None,
            extra: None,
        };
        let mut trajectory = Trajectory::new(episode_id, agent);
        // A multi-step task's policy starts on its first step's instruction.
        let instruction = match task.steps.first() {
            Some(step) if task.is_multi_step() => &step.instruction,
            _ => &task.instruction,
        };
        let mut first = Step::new(1, StepSource::User, instruction.clone());
        first.timestamp = Some(now());
        trajectory.steps.push(first);
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let result = TrialResult {
            id: format!("{episode_id}#{number}"),
            task_name: task.name.clone(),
            trial_name: name,
            trial_uri: format!("file://{}", dir.display()),
            task_id: Value::String(task.name.clone()),
            task_checksum: task.checksum.clone(),
            agent_info: AgentInfo {
                name: POLICY_NAME.into(),
                version: "1".into(),
                model_info: None,
            },
            started_at: Some(Utc::now()),
            ..TrialResult::default()
        };
        Ok(Self {
            dir: dir.to_owned(),
            trajectory,
            result,
            finished: false,
        })
    }

    /// Where the environment's command output goes: nowhere (the observations carry it).
    pub fn sink(&self) -> OutputSink {
        Arc::new(|_, _| {})
    }

    /// Records one action (`None` for the reset) and what it observed.
    pub fn observed(&mut self, action: Option<&Action>, result: &StepResult) {
        let Some(action) = action else { return };
        let step_id = self.trajectory.steps.len() as u64 + 1;
        let call_id = format!("call_{step_id}");
        let arguments = match serde_json::to_value(action) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let observation = serde_json::to_string(&serde_json::json!({
            "observation": result.observation,
            "reward": result.reward,
            "done": result.done,
        }))
        .unwrap_or_default();
        let mut step = Step::new(step_id, StepSource::Agent, String::new());
        step.timestamp = Some(now());
        step.tool_calls = Some(vec![ToolCall {
            tool_call_id: call_id.clone(),
            function_name: action.action_type.clone(),
            arguments,
            extra: None,
        }]);
        step.observation = Some(AtifObservation {
            results: vec![ObservationResult {
                source_call_id: Some(call_id),
                content: Some(Content::from(observation)),
                subagent_trajectory_ref: None,
                extra: None,
            }],
        });
        self.trajectory.steps.push(step);
    }

    /// Writes the record of the ended episode (once).
    pub fn finish(&mut self, state: &EpisodeState, ending: &Ending) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.result.finished_at = Some(Utc::now());
        self.result.verifier_result = ending.verifier.clone();
        self.result.verifier_environment_mode = ending.verifier_environment_mode.clone();
        self.result.step_results = ending.step_results.clone();
        if ending.verifier.is_none()
            && let Some(error) = &ending.error
        {
            self.result.exception_info = Some(ExceptionInfo {
                exception_type: ending
                    .error_type
                    .clone()
                    .unwrap_or(ExceptionType::CancelledError),
                exception_message: error.clone(),
                exception_traceback: String::new(),
                occurred_at: Utc::now(),
                policy: None,
                policy_override: None,
            });
        }
        self.result.complete_harbor_fields();
        let mut extra = Map::new();
        extra.insert("steps".into(), state.step_count.into());
        self.trajectory.extra = Some(extra);
        let trajectory = self.dir.join("agent").join("trajectory.json");
        if let Err(e) = tasks::atomic::write_json_atomic(&trajectory, &self.trajectory.to_value()) {
            tracing::warn!("{}: {e}", trajectory.display());
        }
        let result = self.dir.join("result.json");
        if let Err(e) = tasks::atomic::write_json_atomic(&result, &self.result) {
            tracing::warn!("{}: {e}", result.display());
        }
    }
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
