//! `job.log`: the job's own log in the job dir, as Harbor writes one. One timestamped line per
//! thing that happened to the job: start and configuration, images with their durations, every
//! trial's outcome, retries, pauses, warnings and errors, and the final summary (appended by
//! the command line). A resumed job appends to the same file.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::event_text;
use crate::events::TimedEvent;

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

    /// Writes `text`, stamped with the UTC time now (see [`event_text::stamped`]).
    pub fn line(&self, text: &str) {
        self.write(event_text::stamped(chrono::Utc::now(), text).as_bytes());
    }

    /// Writes a block of text (the end summary) as it is, after a timestamped heading.
    pub fn block(&self, heading: &str, text: &str) {
        self.line(heading);
        let mut body = text.trim_matches('\n').to_owned();
        body.push('\n');
        self.write(body.as_bytes());
    }

    /// The line for `event` at its own time, if it belongs in the job log (phase changes do
    /// not); the same words `--progress lines` prints.
    pub fn event(&self, event: &TimedEvent) {
        if let Some(line) = event_text::line(event) {
            self.write(line.as_bytes());
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
