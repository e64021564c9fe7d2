//! The words of events: the one renderer behind `job.log` and `--progress lines`, so a line a
//! user sees in CI output reads exactly as the job's log has it.

use tasks::exception::first_line;
use tasks::records::TrialResult;

use crate::backend::ImageOrigin;
use crate::events::{Event, TimedEvent};

/// The format of every stamp: UTC to the millisecond.
const STAMP: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// `text` as log lines: each line prefixed with `at`, continuation lines indented two spaces
/// (a build's output under its failure), each ending in a newline.
pub fn stamped(at: chrono::DateTime<chrono::Utc>, text: &str) -> String {
    let stamp = at.format(STAMP);
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let lead = if i == 0 { "" } else { "  " };
        out.push_str(&format!("{stamp} {lead}{line}\n"));
    }
    out
}

/// The stamped line(s) of `event`, newline-terminated; `None` for events that are state only
/// (phase changes, image progress).
pub fn line(event: &TimedEvent) -> Option<String> {
    describe(&event.event).map(|text| stamped(event.at, &text))
}

/// What `event` says, without a stamp; `None` for state-only events.
pub fn describe(event: &Event) -> Option<String> {
    Some(match event {
        Event::TrialStarted { trial, attempt } if *attempt > 1 => {
            format!("trial {trial}: attempt {attempt} started")
        }
        Event::TrialStarted { trial, .. } => format!("trial {trial}: started"),
        Event::Placed { trial, engine } => format!("trial {trial}: environment on engine {engine}"),
        Event::Phase { .. } => return None,
        Event::ImageReady {
            task,
            tag,
            id,
            seconds,
            image,
            ..
        } => {
            let how = match image.origin {
                ImageOrigin::Reused => "reused".to_owned(),
                origin => format!("{} in {seconds:.1}s", origin.as_str()),
            };
            format!("image of {task}: {tag} ({id}) {how}")
        }
        Event::ImageProgress { .. } => return None,
        Event::ImageFailed { task, message } => {
            format!("error: the image of {task} could not be prepared: {message}")
        }
        Event::TrialRetrying {
            trial,
            attempt,
            exception,
            message,
            delay,
        } => format!(
            "retry: trial {trial} attempt {attempt} ended in {exception} ({}); kept as {trial}/attempts/{attempt}/, retrying in {:.1}s",
            first_line(message),
            delay.as_secs_f64()
        ),
        Event::TrialFinished(result) => finished_line(result),
        Event::Paused { seconds } => format!(
            "warning: the runner was paused for {seconds:.1}s (SIGSTOP or a suspended machine); trials that timed out meanwhile are recorded as RunnerPausedError (infrastructure) and retried"
        ),
        Event::Warning(text) => format!("warning: {text}"),
    })
}

/// `trial X: scored, reward 1.0 (started …, finished …, 2 attempts)`.
pub fn finished_line(result: &TrialResult) -> String {
    let reward = result
        .reward()
        .map(|r| format!(", reward {r}"))
        .unwrap_or_default();
    let exception = result
        .exception_info
        .as_ref()
        .map(|e| format!(", {}", e.headline()))
        .unwrap_or_default();
    let when = match (result.started_at, result.finished_at) {
        (Some(s), Some(f)) => format!(
            " (started {}, finished {}, {:.1}s)",
            s.format("%H:%M:%S"),
            f.format("%H:%M:%S"),
            (f - s).num_milliseconds() as f64 / 1000.0
        ),
        _ => String::new(),
    };
    let attempts = match result.attempt_count() {
        1 => String::new(),
        n => format!(" after {n} attempts"),
    };
    format!(
        "trial {}: {}{reward}{exception}{when}{attempts}",
        result.trial_name,
        result.outcome()
    )
}
