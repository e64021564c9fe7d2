//! Events the job emits; the recorder (job dir) and the reporter (terminal) consume them.

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
    /// A trial started.
    TrialStarted {
        /// Trial name.
        trial: String,
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
    /// A trial finished; its result.json is written.
    TrialFinished(Box<TrialResult>),
}
