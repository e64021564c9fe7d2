//! `job.log`: the job's own log in the job dir, as Harbor writes one. One timestamped line per
//! thing that happened to the job: start and configuration, images with their durations, every
//! trial's outcome, retries, pauses, warnings and errors, and the final summary (appended by
//! the command line). A resumed job appends to the same file.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tasks::exception::first_line;
use tasks::records::TrialResult;

use crate::events::Event;

/// The name of the job log inside the job dir.
pub const JOB_LOG: &str = "job.log";

/// A shared handle on a job's log file.
#[derive(Clone)]
pub struct JobLog {
    file: Arc<Mutex<Option<std::fs::File>>>,
}

impl JobLog {
    /// Opens (appends to) `<job_dir>/job.log`. A log that cannot be opened degrades to none:
    /// the records, not the log, are what a job is judged by.
    pub fn open(job_dir: &Path) -> JobLog {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(job_dir.join(JOB_LOG))
            .ok();
        JobLog {
            file: Arc::new(Mutex::new(file)),
        }
    }

    /// Writes one line, prefixed with the UTC time.
    pub fn line(&self, text: &str) {
        let stamp = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
        let mut out = String::new();
        for (i, line) in text.lines().enumerate() {
            let lead = if i == 0 { "" } else { "  " };
            out.push_str(&format!("{stamp} {lead}{line}\n"));
        }
        self.write(out.as_bytes());
    }

    /// Writes a block of text (the end summary) as it is, after a timestamped heading.
    pub fn block(&self, heading: &str, text: &str) {
        self.line(heading);
        let mut body = text.trim_matches('\n').to_owned();
        body.push('\n');
        self.write(body.as_bytes());
    }

    /// The line for `event`, if it belongs in the job log (phase changes do not).
    pub fn event(&self, event: &Event) {
        if let Some(text) = describe(event) {
            self.line(&text);
        }
    }

    fn write(&self, bytes: &[u8]) {
        if let Ok(mut guard) = self.file.lock()
            && let Some(file) = guard.as_mut()
        {
            let _ = file.write_all(bytes);
        }
    }
}

fn describe(event: &Event) -> Option<String> {
    Some(match event {
        Event::TrialStarted { trial, attempt } if *attempt > 1 => {
            format!("trial {trial}: attempt {attempt} started")
        }
        Event::TrialStarted { trial, .. } => format!("trial {trial}: started"),
        Event::Phase { .. } => return None,
        Event::ImageReady {
            task,
            tag,
            id,
            seconds,
            image,
            ..
        } => format!(
            "image of {task}: {tag} ({id}) {} in {seconds:.1}s",
            image.origin.as_str()
        ),
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
            "warning: the runner was paused for {seconds:.1}s (SIGSTOP or a suspended machine); trials that timed out meanwhile are recorded as RunnerPausedError"
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
