//! The host-side watchdog: every phase of a trial gets its deadline plus a grace, measured on
//! the host. The phases bound their own work (in-container `timeout`, host timeouts around
//! starts and setup), but a backend call can still hang where no inner deadline reaches: an
//! engine that stops answering, an exec or a download whose stream never ends. When a phase
//! outlives its allowance the watchdog ends the trial as `BackendTimeoutError`, an
//! infrastructure error (so it is retried, never counted against the agent).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use tasks::ExceptionType;

use crate::events::Phase;
use crate::failure::TrialFailure;

/// How long past its own deadline a phase may run before the watchdog ends the trial, unless
/// the job says otherwise. Generous: inner deadlines fire first, and salvaging logs after a
/// verifier timeout or collecting a large `/logs/artifacts` takes time of its own.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
struct Current {
    phase: Phase,
    started: Instant,
    limit: Option<Duration>,
    generation: u64,
}

/// The phase a trial is in, when it began, and how long it may take.
#[derive(Debug)]
pub struct PhaseClock {
    current: Mutex<Option<Current>>,
}

impl PhaseClock {
    /// A clock with no phase yet (nothing to watch).
    pub fn new() -> PhaseClock {
        PhaseClock {
            current: Mutex::new(None),
        }
    }

    /// Enters `phase`, allowed `limit` (`None`: unbounded, not watched). Returns the phase
    /// that ended and how long it took.
    pub fn enter(&self, phase: Phase, limit: Option<Duration>) -> Option<(Phase, Duration)> {
        let mut current = self.current.lock().expect("not poisoned");
        let now = Instant::now();
        let ended = current.map(|c| (c.phase, now.saturating_duration_since(c.started)));
        let generation = current.map_or(0, |c| c.generation + 1);
        *current = Some(Current {
            phase,
            started: now,
            limit,
            generation,
        });
        ended
    }

    /// Ends the current phase; returns it and how long it took.
    pub fn leave(&self) -> Option<(Phase, Duration)> {
        let mut current = self.current.lock().expect("not poisoned");
        current
            .take()
            .map(|c| (c.phase, Instant::now().saturating_duration_since(c.started)))
    }

    /// Resolves when the current phase has run past its limit plus `grace` (never, while
    /// phases stay within theirs), with the failure that ends the trial.
    pub async fn expired(&self, grace: Duration) -> TrialFailure {
        loop {
            let current = *self.current.lock().expect("not poisoned");
            let now = Instant::now();
            let wait = match current {
                Some(Current {
                    phase,
                    started,
                    limit: Some(limit),
                    ..
                }) => {
                    let allowed = limit.saturating_add(grace);
                    let deadline = started.checked_add(allowed).unwrap_or(now + allowed);
                    if now >= deadline {
                        return hung(phase, limit, grace);
                    }
                    (deadline - now).min(Duration::from_secs(1))
                }
                _ => Duration::from_secs(1),
            };
            tokio::time::sleep(wait).await;
        }
    }
}

impl Default for PhaseClock {
    fn default() -> Self {
        Self::new()
    }
}

fn hung(phase: Phase, limit: Duration, grace: Duration) -> TrialFailure {
    TrialFailure::new(
        ExceptionType::BackendTimeoutError,
        format!(
            "the phase \"{}\" ran past its {:.0}s deadline and the watchdog's {:.0}s grace: a backend call \
             (engine, exec or transfer) never returned, so the trial was abandoned; check the Docker engine",
            phase.label(),
            limit.as_secs_f64(),
            grace.as_secs_f64()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_phase_past_its_limit_and_grace_is_ended_as_a_backend_timeout() {
        let clock = PhaseClock::new();
        clock.enter(Phase::Verifier, Some(Duration::from_secs(10)));
        let started = Instant::now();
        let failure = clock.expired(Duration::from_secs(5)).await;
        assert_eq!(failure.kind, ExceptionType::BackendTimeoutError);
        assert!(
            failure.message.contains("running verifier"),
            "{}",
            failure.message
        );
        assert!(started.elapsed() >= Duration::from_secs(15));
    }

    #[tokio::test(start_paused = true)]
    async fn entering_a_new_phase_restarts_the_allowance() {
        let clock = std::sync::Arc::new(PhaseClock::new());
        clock.enter(Phase::AgentSetup, Some(Duration::from_secs(10)));
        let watcher = clock.clone();
        let watch = tokio::spawn(async move { watcher.expired(Duration::ZERO).await });
        tokio::time::sleep(Duration::from_secs(8)).await;
        let ended = clock.enter(Phase::Agent, None);
        assert_eq!(ended.map(|(p, _)| p), Some(Phase::AgentSetup));
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(!watch.is_finished(), "an unbounded phase is not watched");
        watch.abort();
    }
}
