//! Noticing that the runner was paused.
//!
//! `kill -STOP` (or Ctrl-Z) freezes the runner but not the containers; the monotonic clock
//! keeps running, so on `SIGCONT` every deadline that passed meanwhile fires at once and
//! in-flight trials record timeouts the agent never caused. A suspended machine is the mirror
//! case: the monotonic clock stops while the wall clock jumps. Deadlines cannot be made
//! pause-proof from here (agents hold their own), so the runner detects pauses instead: a
//! ticker compares both clocks every second, and a trial that overlapped a pause records it
//! (`pauses` in result.json) and, if it ended in a timeout, is classified `RunnerPausedError`
//! (an infrastructure error, retried) rather than an agent failure.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tasks::records::PauseRecord;
use tokio_util::sync::CancellationToken;

/// How often the ticker looks at the clocks.
pub const TICK: Duration = Duration::from_secs(1);

/// A gap this much longer than a tick counts as a pause (a busy machine delays ticks by far
/// less; a pause short of this hardly moves a deadline).
pub const THRESHOLD: Duration = Duration::from_secs(5);

/// The length of the pause between two looks at the clocks `monotonic` and `wall` apart, if
/// either gap exceeds the expected interval `expected` by more than [`THRESHOLD`].
pub fn detect(expected: Duration, monotonic: Duration, wall: Duration) -> Option<Duration> {
    let gap = monotonic.max(wall).saturating_sub(expected);
    (gap > THRESHOLD).then_some(gap)
}

#[derive(Debug, Clone)]
struct Pause {
    /// When the runner ran again (monotonic).
    resumed: Instant,
    record: PauseRecord,
}

#[derive(Debug)]
struct State {
    last_mono: Instant,
    last_wall: DateTime<Utc>,
    pauses: Vec<Pause>,
}

/// The pauses seen during a job; shared by the ticker and every trial.
#[derive(Debug, Clone)]
pub struct PauseMonitor {
    state: Arc<Mutex<State>>,
}

impl Default for PauseMonitor {
    fn default() -> Self {
        Self::new()
    }
}

impl PauseMonitor {
    /// A monitor whose clocks start now.
    pub fn new() -> PauseMonitor {
        PauseMonitor {
            state: Arc::new(Mutex::new(State {
                last_mono: Instant::now(),
                last_wall: Utc::now(),
                pauses: Vec::new(),
            })),
        }
    }

    /// Looks at the clocks now; returns a pause that ended just now, if any. Called by the
    /// ticker and by every trial as it finishes (a trial's timer may fire before the ticker
    /// runs after `SIGCONT`).
    pub fn observe(&self) -> Option<PauseRecord> {
        self.observe_at(Instant::now(), Utc::now())
    }

    fn observe_at(&self, mono: Instant, wall: DateTime<Utc>) -> Option<PauseRecord> {
        let mut state = self.state.lock().expect("not poisoned");
        let mono_gap = mono.saturating_duration_since(state.last_mono);
        let wall_gap = (wall - state.last_wall).to_std().unwrap_or_default();
        state.last_mono = mono;
        state.last_wall = wall;
        let gap = detect(TICK, mono_gap, wall_gap)?;
        let record = PauseRecord {
            detected_at: wall,
            seconds: (gap.as_secs_f64() * 10.0).round() / 10.0,
        };
        state.pauses.push(Pause {
            resumed: mono,
            record: record.clone(),
        });
        Some(record)
    }

    /// Pauses that ended after `since` (a trial's start), i.e. that overlapped the trial.
    pub fn since(&self, since: Instant) -> Vec<PauseRecord> {
        let state = self.state.lock().expect("not poisoned");
        state
            .pauses
            .iter()
            .filter(|p| p.resumed > since)
            .map(|p| p.record.clone())
            .collect()
    }

    /// Ticks until `cancel`, passing each pause seen to `on_pause`.
    pub async fn run(self, cancel: CancellationToken, on_pause: impl Fn(&PauseRecord)) {
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = ticks.tick() => {
                    if let Some(pause) = self.observe() {
                        on_pause(&pause);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_beyond_the_threshold_on_either_clock_are_pauses() {
        let s = Duration::from_secs;
        assert_eq!(detect(s(1), s(1), s(1)), None);
        assert_eq!(detect(s(1), s(5), s(5)), None, "a slow tick is not a pause");
        assert_eq!(
            detect(s(1), s(31), s(31)),
            Some(s(30)),
            "SIGSTOP: both clocks"
        );
        assert_eq!(
            detect(s(1), s(1), s(61)),
            Some(s(60)),
            "suspend: wall clock only"
        );
    }

    #[test]
    fn a_pause_is_seen_once_and_by_trials_that_overlapped_it() {
        let monitor = PauseMonitor::new();
        let (start, wall) = {
            let state = monitor.state.lock().unwrap();
            (state.last_mono, state.last_wall)
        };
        let before = start;
        let later = start + Duration::from_secs(20);
        let seen = monitor
            .observe_at(later, wall + chrono::Duration::seconds(20))
            .expect("a 20 s gap");
        assert_eq!(seen.seconds, 19.0);
        assert!(
            monitor
                .observe_at(later + TICK, wall + chrono::Duration::seconds(21))
                .is_none()
        );
        assert_eq!(monitor.since(before).len(), 1);
        assert!(monitor.since(later).is_empty(), "a trial started after it");
    }
}
