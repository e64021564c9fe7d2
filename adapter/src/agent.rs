//! The agent contract: set up inside a sandbox, then run one instruction under a deadline.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tasks::ExceptionType;
use tasks::records::{AgentConfig, AgentContext};
use tasks::{Sandbox, SandboxError, Task};

use crate::installed::trial_files;

/// What an agent needs to know about the trial it runs in.
#[derive(Debug, Clone)]
pub struct AgentRun<'a> {
    /// The task.
    pub task: &'a Task,
    /// The trial's directory on the host; the agent writes `agent/...` records under it.
    pub trial_dir: PathBuf,
    /// The user the agent runs as (`[agent].user`), `None` for the container default.
    pub user: Option<String>,
    /// Setup must finish by this instant.
    pub setup_deadline: Instant,
    /// The run must finish by this instant; `None` means no deadline. The agent enforces it
    /// itself (cancelling its work inside the container) and returns a timeout error.
    pub run_deadline: Option<Instant>,
    /// The agent timeout in seconds as the task states it, passed to agents that want it.
    pub agent_timeout_sec: Option<f64>,
    /// The step of a multi-step task this run is for (`[[steps]] name`); `None` for a
    /// single-step task. Each step is a new `run`, after one `setup`; `trial_dir` is then the
    /// step's own directory (`<trial>/steps/<name>`), so `agent/...` records stay per step.
    pub step: Option<String>,
    /// What ends the agent's turn the moment its command exits (the LLM bridge stops serving
    /// the trial then); `None` when nothing needs telling.
    pub end_turn: Option<EndTurn<'a>>,
}

/// How an agent says its turn is over, as soon as it is: a command agent runs `in_container`
/// in the same shell right after its command exits (so no process of the container can see
/// the command gone while its turn still counts), and every agent calls [`EndTurn::now`] once
/// its run has ended, before it collects anything.
#[derive(Clone, Copy)]
pub struct EndTurn<'a> {
    /// A shell command (for `sh`), run after the agent's command in the same exec; it never
    /// fails and prints nothing.
    pub in_container: &'a str,
    /// Ends the turn on the host.
    pub on_host: &'a (dyn Fn() + Send + Sync),
}

impl EndTurn<'_> {
    /// Ends the turn on the host (idempotent).
    pub fn now(&self) {
        (self.on_host)();
    }
}

impl std::fmt::Debug for EndTurn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndTurn").finish_non_exhaustive()
    }
}

impl AgentRun<'_> {
    /// Ends the agent's turn on the host, when something needs telling.
    pub fn end_turn_now(&self) {
        if let Some(end) = &self.end_turn {
            end.now();
        }
    }

    /// The exact text an agent is sent: `instruction` verbatim, then `suffix` (the agent's
    /// [`Agent::instruction_suffix`]); also recorded as the trial's `agent/instruction.txt`.
    pub fn record_instruction(
        &self,
        instruction: &str,
        suffix: Option<&str>,
    ) -> Result<String, AgentError> {
        let sent = format!("{instruction}{}", suffix.unwrap_or_default());
        trial_files::write(&self.trial_dir, "instruction.txt", sent.as_bytes())?;
        Ok(sent)
    }
}

/// Setup work stops this long before the setup deadline, so the agent (not the runner's
/// backstop) reports what failed and saves its logs.
const SETUP_MARGIN: Duration = Duration::from_secs(2);

impl AgentRun<'_> {
    /// The instant an agent's own setup steps must end by: [`AgentRun::setup_deadline`] less a
    /// small margin (the deadline itself when it is too close to subtract from).
    pub fn setup_work_deadline(&self) -> Instant {
        self.setup_deadline
            .checked_sub(SETUP_MARGIN)
            .unwrap_or(self.setup_deadline)
    }
}

/// A host directory an agent's trials see read-only (its prepared files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where it appears in the container.
    pub container: String,
}

/// What the agent reports after a run.
#[derive(Debug, Clone, Default)]
pub struct AgentRunReport {
    /// Token counts and cost, when the agent reports them.
    pub context: Option<AgentContext>,
}

/// How an agent phase failed, mapped onto Harbor's exception type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentErrorKind {
    /// Setup did not finish by its deadline.
    SetupTimeout,
    /// Setup failed (install command exit code, upload refused, ...).
    SetupFailed,
    /// The run hit its deadline; the work was cancelled. The verifier still runs.
    Timeout,
    /// The agent exited non-zero or ended in a failed state. The verifier still runs.
    NonZeroExit,
    /// The agent's server never became healthy or died: an infrastructure error.
    Server,
    /// The trajectory conversion produced an invalid ATIF file.
    Trajectory,
    /// The sandbox failed underneath the agent.
    Sandbox,
}

impl AgentErrorKind {
    /// Harbor's exception class name for this kind.
    pub fn exception_type(self) -> ExceptionType {
        match self {
            AgentErrorKind::SetupTimeout => ExceptionType::AgentSetupTimeoutError,
            AgentErrorKind::SetupFailed => ExceptionType::AgentSetupError,
            AgentErrorKind::Timeout => ExceptionType::AgentTimeoutError,
            AgentErrorKind::NonZeroExit => ExceptionType::NonZeroAgentExitCodeError,
            AgentErrorKind::Server => ExceptionType::AgentServerError,
            AgentErrorKind::Trajectory => ExceptionType::TrajectoryValidationError,
            AgentErrorKind::Sandbox => ExceptionType::EnvironmentError,
        }
    }

    /// True when the trial still goes on to verification after this error (as in Harbor).
    pub fn continues_to_verification(self) -> bool {
        matches!(
            self,
            AgentErrorKind::Timeout | AgentErrorKind::NonZeroExit | AgentErrorKind::Trajectory
        )
    }
}

/// An agent phase failure.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct AgentError {
    /// What kind of failure.
    pub kind: AgentErrorKind,
    /// What happened and what to do.
    pub message: String,
    /// Token counts, cost and metadata gathered before the failure (e.g. a run cancelled at its
    /// deadline still used tokens); the runner records them as `agent_result`.
    pub context: Option<Box<AgentContext>>,
}

impl AgentError {
    /// A new error.
    pub fn new(kind: AgentErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            context: None,
        }
    }

    /// The same error carrying what the agent reported before it failed.
    pub fn with_context(mut self, context: Option<AgentContext>) -> Self {
        self.context = context.map(Box::new);
        self
    }
}

impl From<SandboxError> for AgentError {
    fn from(err: SandboxError) -> Self {
        AgentError::new(AgentErrorKind::Sandbox, err.to_string())
    }
}

/// An agent the runner can set up and run inside a trial's sandbox.
pub trait Agent: Send + Sync {
    /// The name recorded as `agents[].name` and `agent_info.name`.
    fn name(&self) -> &str;

    /// The version known before setup (`"unknown"` if it is only learnt in the container).
    fn version(&self) -> String;

    /// `provider/model`, if the agent uses a model.
    fn model_name(&self) -> Option<String> {
        None
    }

    /// The models the agent's config lists as the ones it may call (`models`); empty when it
    /// lists none (then `-m` or [`Agent::model_name`] declares the model).
    fn declared_models(&self) -> Vec<String> {
        Vec::new()
    }

    /// The job config's `agents[]` entry for this agent (name, model, and whatever else the
    /// agent records: kwargs, redacted env).
    fn job_config(&self) -> AgentConfig {
        AgentConfig {
            name: Some(self.name().to_owned()),
            model_name: self.model_name(),
            ..AgentConfig::default()
        }
    }

    /// Text the agent appends to every instruction, recorded verbatim in the job config.
    fn instruction_suffix(&self) -> Option<&str> {
        None
    }

    /// Host directories every trial's container mounts read-only (prepared agent files).
    fn host_mounts(&self) -> Vec<HostMount> {
        Vec::new()
    }

    /// Installs the agent in the sandbox; returns the version learnt there, if any. Agents
    /// that need nothing installed keep the default, which does nothing.
    fn setup<S: Sandbox>(
        &self,
        _sandbox: &S,
        _run: &AgentRun<'_>,
    ) -> impl Future<Output = Result<Option<String>, AgentError>> + Send {
        std::future::ready(Ok(None))
    }

    /// Runs `instruction` to a final state.
    fn run<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        instruction: &str,
    ) -> impl Future<Output = Result<AgentRunReport, AgentError>> + Send;
}
