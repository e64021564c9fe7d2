//! Events the job emits; the recorder (job dir) and the reporter (terminal) consume them.

use std::time::Duration;

use tasks::ExceptionType;
use tasks::records::TrialResult;

/// A trial phase, for the live view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the task image.
    Image,
    /// Container start and healthcheck.
    Environment,
    /// Agent install.
    AgentSetup,
    /// Agent run.
    Agent,
    /// Tests.
    Verifier,
    /// Logs out, container removed.
    Teardown,
}

impl Phase {
    /// Short label for the live view.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Image => "image",
            Phase::Environment => "starting environment",
            Phase::AgentSetup => "setting up agent",
            Phase::Agent => "running agent",
            Phase::Verifier => "running verifier",
            Phase::Teardown => "tearing down",
        }
    }
}

/// Something that happened in a job.
#[derive(Debug, Clone)]
pub enum Event {
    /// A trial (or a retry of it) started.
    TrialStarted {
        /// Trial name.
        trial: String,
        /// Which attempt, from 1.
        attempt: u32,
    },
    /// A trial entered a phase.
    Phase {
        /// Trial name.
        trial: String,
        /// The phase.
        phase: Phase,
    },
    /// An image is ready.
    ImageReady {
        /// Task name.
        task: String,
        /// The image tag.
        tag: String,
        /// The image id.
        id: String,
        /// Built now (false: reused).
        built: bool,
        /// Seconds it took.
        seconds: f64,
    },
    /// A trial finished for good; its result.json is written and durable.
    TrialFinished(Box<TrialResult>),
    /// An attempt of a trial ended in a retryable infrastructure error; it is kept under
    /// `<trial>/attempts/<attempt>/` and the trial runs again after `delay`.
    TrialRetrying {
        /// Trial name.
        trial: String,
        /// The attempt that failed, from 1.
        attempt: u32,
        /// Its exception.
        exception: ExceptionType,
        /// Its message.
        message: String,
        /// The backoff before the next attempt.
        delay: Duration,
    },
    /// The runner noticed it had been paused (SIGSTOP, a suspended machine).
    Paused {
        /// For how long.
        seconds: f64,
    },
    /// Something the user should know that is not a trial's outcome.
    Warning(String),
}
