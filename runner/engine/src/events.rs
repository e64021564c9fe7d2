//! Events the job emits, each stamped with its time as it is sent ([`TimedEvent`]); the
//! recorder (job dir) and the reporter (terminal) consume them, and [`crate::event_text`]
//! gives both the same words.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc::UnboundedSender;

use tasks::ExceptionType;
use tasks::records::TrialResult;

use crate::backend::ImageInfo;

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
    /// A trial's environment started on one engine of a pool (`--docker-host` several times):
    /// where its load is until it finishes. Not sent on a single engine.
    Placed {
        /// Trial name.
        trial: String,
        /// The engine, as the trial's record names it (never credentials).
        engine: String,
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
        /// Built now (false: reused or pulled; see `image.origin`).
        built: bool,
        /// Seconds it took.
        seconds: f64,
        /// The image in full: origin (built, pulled, reused), registry digests, engine.
        image: ImageInfo,
    },
    /// Progress while a task's image is prepared (a pull's layers and bytes, a build's step);
    /// `ImageReady` or `ImageFailed` ends it.
    ImageProgress {
        /// Task name.
        task: String,
        /// One line, e.g. `pulling 127.0.0.1:5000/x:1: 3/7 layers, 120.0/300.0 MB`.
        line: String,
    },
    /// A task's image could not be prepared; every trial of the task fails with `message`.
    ImageFailed {
        /// Task name.
        task: String,
        /// The whole failure: what failed, the engine's answer and, for a build, the last
        /// lines of its output.
        message: String,
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

/// An event with when it happened: stamped as it was sent, so every consumer (job.log, the
/// terminal, a library user) agrees on its time however late it reads it.
#[derive(Debug, Clone)]
pub struct TimedEvent {
    /// The wall-clock time, UTC.
    pub at: DateTime<Utc>,
    /// Time since the job started.
    pub elapsed: Duration,
    /// What happened.
    pub event: Event,
}

/// The sending end of a job's events: every event sent through it is stamped.
#[derive(Debug, Clone)]
pub struct EventSender {
    tx: UnboundedSender<TimedEvent>,
    // tokio's clock, so a test on paused time sees elapsed times that agree with its own.
    started: tokio::time::Instant,
}

impl EventSender {
    /// A sender over `tx`, measuring elapsed time from now (the job's start).
    pub fn new(tx: UnboundedSender<TimedEvent>) -> EventSender {
        EventSender {
            tx,
            started: tokio::time::Instant::now(),
        }
    }

    /// Stamps `event` and sends it. False when the job's collector has gone (the job is
    /// over), which no sender needs to act on.
    pub fn send(&self, event: Event) -> bool {
        self.tx
            .send(TimedEvent {
                at: Utc::now(),
                elapsed: self.started.elapsed(),
                event,
            })
            .is_ok()
    }
}
