//! [`TrialFailure`]: why a trial (or one of its phases) ended, as a typed value.

use std::any::Any;

use adapter::AgentError;
use tasks::records::{AgentContext, VerifierResult};
use tasks::{ExceptionType, SandboxError};
use verifiers::VerifierError;

use crate::backend::BackendError;

/// A phase failure: Harbor's exception type, a message that says what to do, and what was
/// learnt before it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialFailure {
    /// The exception type recorded in `exception_info`.
    pub kind: ExceptionType,
    /// What happened and what to do.
    pub message: String,
    /// What the verifier learnt before failing (test exit code, named checks; no rewards).
    pub partial: Option<Box<VerifierResult>>,
    /// What the agent reported before failing (tokens, cost, final status).
    pub agent_context: Option<Box<AgentContext>>,
}

impl TrialFailure {
    /// A failure of `kind`.
    pub fn new(kind: ExceptionType, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            partial: None,
            agent_context: None,
        }
    }

    /// The run was interrupted while the trial ran.
    pub fn cancelled() -> Self {
        Self::new(
            ExceptionType::CancelledError,
            "the run was interrupted (Ctrl-C, SIGTERM or SIGHUP)",
        )
    }

    /// The runner itself panicked inside the trial: a bug, recorded rather than lost.
    pub fn panicked(payload: Box<dyn Any + Send>) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Self::new(
            ExceptionType::RunnerError,
            format!(
                "the runner failed inside this trial ({what}); this is a runner bug, please report it"
            ),
        )
    }

    /// True when the trial still goes on to verification after this failure, as in Harbor:
    /// the agent ran out of time or failed, but what it left can still be scored, unless the
    /// job's `override_error_policy` says `should_grade: false` for the type (see
    /// [`crate::error_overrides`]).
    pub fn continues_to_verification(
        &self,
        overrides: &tasks::error_policy::ErrorPolicyOverrides,
    ) -> bool {
        crate::error_overrides::verifies_after(&self.kind, overrides)
    }
}

impl From<AgentError> for TrialFailure {
    fn from(error: AgentError) -> Self {
        Self {
            kind: error.kind.exception_type(),
            message: error.message,
            partial: None,
            agent_context: error.context,
        }
    }
}

impl From<VerifierError> for TrialFailure {
    fn from(error: VerifierError) -> Self {
        Self {
            kind: error.exception_type(),
            message: error.to_string(),
            partial: error.partial.map(Box::new),
            agent_context: None,
        }
    }
}

impl From<BackendError> for TrialFailure {
    fn from(error: BackendError) -> Self {
        Self::new(error.exception_type(), error.message)
    }
}

impl From<SandboxError> for TrialFailure {
    fn from(error: SandboxError) -> Self {
        Self::new(ExceptionType::EnvironmentError, error.to_string())
    }
}
