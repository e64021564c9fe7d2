//! The wire format: the Terminal-Bench wrapper's action and observation (OpenEnv's
//! `tbench2_env` models) and the envelopes `openenv-core` puts around them, over HTTP
//! (`/reset`, `/step`) and over the WebSocket session (`{"type": …, "data": …}`).
//!
//! Field names, defaults and the unknown-field refusal follow the wrapper's pydantic models
//! (`extra="forbid"`), so a client written for the wrapper meets the same contract here.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One action of a policy (the wrapper's `Tbench2Action`). Every field has the wrapper's
/// default; an unknown field is refused, as pydantic's `extra="forbid"` does.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Action {
    /// `exec`, `write`, `view`, `wait`, `kill`, `write_file`, `evaluate` or `close`.
    pub action_type: String,
    /// The shell command (`exec`), or the input to send (`write`).
    pub command: String,
    /// The non-blocking process an action is about (`exec` with `block = false`, `write`,
    /// `view`, `wait`, `kill`).
    pub session_id: Option<String>,
    /// `exec` waits for the command (true) or starts it in the background (false).
    pub block: bool,
    /// How long `wait` waits for the process to end.
    pub wait_seconds: Option<f64>,
    /// The file `write_file` writes.
    pub file_path: String,
    /// What `write_file` writes.
    pub content: String,
    /// Free-form metadata of the action (kept in the episode's record).
    pub metadata: Map<String, Value>,
}

impl Default for Action {
    fn default() -> Self {
        Self {
            action_type: "exec".into(),
            command: String::new(),
            session_id: None,
            block: true,
            wait_seconds: None,
            file_path: String::new(),
            content: String::new(),
            metadata: Map::new(),
        }
    }
}

/// The kinds of action, parsed from [`Action::action_type`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Run a command (blocking, or started in the background with `block = false`).
    Exec,
    /// Send input to a background process.
    Write,
    /// Read the output a background process wrote since the last look.
    View,
    /// Wait up to `wait_seconds` for a background process to end, then view it.
    Wait,
    /// Kill a background process.
    Kill,
    /// Write `content` to `file_path`.
    WriteFile,
    /// Kill the policy's processes and run the task's verifier; ends the episode (a
    /// multi-step task's: verifies the current step, then goes on to the next or ends).
    Evaluate,
    /// End the episode and remove its container.
    Close,
}

impl ActionKind {
    /// The kind an `action_type` names, or `None` for an unknown one.
    pub fn parse(name: &str) -> Option<ActionKind> {
        Some(match name {
            "exec" => ActionKind::Exec,
            "write" => ActionKind::Write,
            "view" => ActionKind::View,
            "wait" => ActionKind::Wait,
            "kill" => ActionKind::Kill,
            "write_file" => ActionKind::WriteFile,
            "evaluate" => ActionKind::Evaluate,
            "close" => ActionKind::Close,
            _ => return None,
        })
    }
}

/// What the environment answers (the wrapper's `Tbench2Observation`, without the `done` and
/// `reward` the envelope carries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The task's instruction.
    pub instruction: String,
    /// The command's output (stdout then stderr), cut at the server's cap with a marker.
    pub output: String,
    /// False when the action failed (an error, a refused path, a timeout, a non-zero exit).
    pub success: bool,
    /// What went wrong, empty when nothing did.
    pub error: String,
    /// The task's name.
    pub task_id: String,
    /// The task's directory on the server's host.
    pub task_path: String,
    /// The background process the action was about, if any.
    pub session_id: Option<String>,
    /// The action's type (`reset` for the first observation).
    pub action_type: String,
    /// Details: an exec's exit code and timing, evaluate's rewards and checks.
    pub info: Map<String, Value>,
    /// The same as `info` for evaluate (named checks, `assertions_passed`/`assertions_total`),
    /// which the wrapper's client reads from the observation.
    pub metadata: Map<String, Value>,
}

impl Observation {
    /// An observation of `action_type` on `task`, successful and empty.
    pub fn new(task_id: &str, task_path: &str, instruction: &str, action_type: &str) -> Self {
        Self {
            instruction: instruction.to_owned(),
            output: String::new(),
            success: true,
            error: String::new(),
            task_id: task_id.to_owned(),
            task_path: task_path.to_owned(),
            session_id: None,
            action_type: action_type.to_owned(),
            info: Map::new(),
            metadata: Map::new(),
        }
    }

    /// This observation failed with `error`.
    pub fn failed(mut self, error: impl Into<String>) -> Self {
        self.success = false;
        self.error = error.into();
        self
    }
}

/// One observation with its reward and whether the episode ended: the body of `/reset` and
/// `/step` and the `data` of a WebSocket `observation` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// The observation.
    pub observation: Observation,
    /// The reward (evaluate's; 0.0 at reset as the wrapper does; otherwise null).
    pub reward: Option<f64>,
    /// True once the episode ended (evaluate, close, or the server closed it).
    pub done: bool,
}

/// The episode's state (`/state`, WebSocket `state`): OpenEnv's `State` fields and the
/// wrapper's `Tbench2State` fields.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EpisodeState {
    /// The episode's id.
    pub episode_id: Option<String>,
    /// Steps taken in the episode.
    pub step_count: u64,
    /// The task's name.
    pub task_id: String,
    /// The task's directory on the server's host.
    pub task_path: String,
    /// The last background process named.
    pub session_id: String,
    /// True while the episode's container runs.
    pub terminal_ready: bool,
    /// The last action's type.
    pub last_action_type: String,
    /// The last action's command.
    pub last_command: String,
    /// The last action's output.
    pub last_output: String,
}

/// The parameters of a reset: OpenEnv's `seed` and `episode_id`, and the wrapper's `task_id`
/// (or `task_name`). Other fields are ignored, as the wrapper's `**kwargs` ignores them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ResetParams {
    /// Picks a task deterministically when no task is named.
    pub seed: Option<u64>,
    /// The episode's id (a fresh one when absent).
    pub episode_id: Option<String>,
    /// The task to start (a name from the dataset, or its short name).
    pub task_id: Option<String>,
    /// The wrapper's other name for `task_id`.
    pub task_name: Option<String>,
}

impl ResetParams {
    /// The task named, `task_id` before `task_name`.
    pub fn task(&self) -> Option<&str> {
        self.task_id.as_deref().or(self.task_name.as_deref())
    }
}

/// The body of an HTTP `/step` (OpenEnv's `StepRequest`): the action, and optional fields
/// the server accepts and ignores.
#[derive(Debug, Clone, Deserialize)]
pub struct StepRequest {
    /// The action, as a JSON object (checked against [`Action`] separately so its refusal
    /// reads as a validation error).
    pub action: Map<String, Value>,
    /// Accepted and ignored (the server's `--exec-timeout` caps every command).
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Accepted and ignored.
    #[serde(default)]
    pub request_id: Option<String>,
}

/// An incoming WebSocket message: `{"type": "reset"|"step"|"state"|"close", "data": …}`.
#[derive(Debug, Clone, PartialEq)]
pub enum WsRequest {
    /// Start (or restart) the session's episode.
    Reset(ResetParams),
    /// One action, as a JSON object.
    Step(Map<String, Value>),
    /// The episode's state.
    State,
    /// End the session.
    Close,
}

/// The codes of OpenEnv's WebSocket errors (`WSErrorCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The message is not JSON.
    InvalidJson,
    /// The message's `type` is unknown.
    UnknownType,
    /// The message or its action does not match the schema.
    ValidationError,
    /// The action could not be carried out.
    ExecutionError,
    /// The server runs `--max-sessions` sessions already.
    CapacityReached,
    /// The session failed as a whole.
    SessionError,
}

impl ErrorCode {
    /// The code as OpenEnv spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "INVALID_JSON",
            ErrorCode::UnknownType => "UNKNOWN_TYPE",
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::ExecutionError => "EXECUTION_ERROR",
            ErrorCode::CapacityReached => "CAPACITY_REACHED",
            ErrorCode::SessionError => "SESSION_ERROR",
        }
    }
}

/// Reads one WebSocket text message; the error is the message to send back.
pub fn parse_ws_request(text: &str) -> Result<WsRequest, (ErrorCode, String)> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| (ErrorCode::InvalidJson, format!("Invalid JSON: {e}")))?;
    let Value::Object(mut message) = value else {
        return Err((
            ErrorCode::ValidationError,
            "Invalid message: expected a JSON object".into(),
        ));
    };
    let kind = message
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let data = message.remove("data");
    let object = |data: Option<Value>, required: bool| match data {
        Some(Value::Object(map)) => Ok(map),
        None if !required => Ok(Map::new()),
        _ => Err((
            ErrorCode::ValidationError,
            format!("Invalid message: `data` of a {kind} message must be an object"),
        )),
    };
    match kind.as_str() {
        "reset" => {
            let data = object(data, false)?;
            let params = serde_json::from_value(Value::Object(data)).map_err(|e| {
                (
                    ErrorCode::ValidationError,
                    format!("Invalid reset parameters: {e}"),
                )
            })?;
            Ok(WsRequest::Reset(params))
        }
        "step" => Ok(WsRequest::Step(object(data, true)?)),
        "state" => Ok(WsRequest::State),
        "close" => Ok(WsRequest::Close),
        other => Err((
            ErrorCode::UnknownType,
            format!("Unknown message type: {other}"),
        )),
    }
}

/// An action object that does not match the schema (an unknown field, a wrong type).
#[derive(Debug, thiserror::Error)]
#[error("Invalid action: {0}")]
pub struct InvalidAction(#[source] serde_json::Error);

/// Reads an action from its JSON object, refusing unknown fields and wrong types.
pub fn parse_action(data: Map<String, Value>) -> Result<Action, InvalidAction> {
    serde_json::from_value(Value::Object(data)).map_err(InvalidAction)
}

/// The WebSocket reply carrying an observation.
pub fn ws_observation(result: &StepResult) -> Value {
    serde_json::json!({"type": "observation", "data": result})
}

/// The WebSocket reply carrying the state.
pub fn ws_state(state: &EpisodeState) -> Value {
    serde_json::json!({"type": "state", "data": state})
}

/// The WebSocket reply carrying an error, with OpenEnv's `message` and `code`.
pub fn ws_error(code: ErrorCode, message: &str) -> Value {
    serde_json::json!({"type": "error", "data": {"message": message, "code": code.as_str()}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_takes_the_wrappers_defaults_and_refuses_unknown_fields() {
        let action = parse_action(Map::new()).unwrap();
        assert_eq!(action, Action::default());
        assert_eq!(action.action_type, "exec");
        assert!(action.block);
        let mut data = Map::new();
        data.insert("cmd".into(), "ls".into());
        assert!(parse_action(data).unwrap_err().to_string().contains("cmd"));
        let mut data = Map::new();
        data.insert("block".into(), "yes".into());
        assert!(parse_action(data).is_err());
    }

    #[test]
    fn websocket_messages_parse_or_name_their_fault() {
        assert_eq!(
            parse_ws_request(r#"{"type":"reset","data":{"task_id":"t","seed":3,"x":1}}"#).unwrap(),
            WsRequest::Reset(ResetParams {
                seed: Some(3),
                task_id: Some("t".into()),
                ..ResetParams::default()
            })
        );
        assert_eq!(
            parse_ws_request(r#"{"type":"state"}"#).unwrap(),
            WsRequest::State
        );
        assert_eq!(
            parse_ws_request(r#"{"type":"close"}"#).unwrap(),
            WsRequest::Close
        );
        assert_eq!(parse_ws_request("{").unwrap_err().0, ErrorCode::InvalidJson);
        assert_eq!(
            parse_ws_request(r#"{"type":"fly"}"#).unwrap_err().0,
            ErrorCode::UnknownType
        );
        assert_eq!(
            parse_ws_request(r#"{"type":"step"}"#).unwrap_err().0,
            ErrorCode::ValidationError
        );
        assert_eq!(
            parse_ws_request("[1]").unwrap_err().0,
            ErrorCode::ValidationError
        );
    }

    #[test]
    fn replies_have_openenvs_envelopes() {
        let obs = Observation::new("t", "/p", "do it", "reset");
        let result = StepResult {
            observation: obs,
            reward: Some(0.0),
            done: false,
        };
        let reply = ws_observation(&result);
        assert_eq!(reply["type"], "observation");
        assert_eq!(reply["data"]["observation"]["instruction"], "do it");
        assert_eq!(reply["data"]["reward"], 0.0);
        let error = ws_error(ErrorCode::CapacityReached, "full");
        assert_eq!(error["data"]["code"], "CAPACITY_REACHED");
    }
}
