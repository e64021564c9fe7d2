//! `trial.log`: a plain timestamped log of what the runner did in a trial, with the streamed
//! output of every command.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A shared handle on a trial's log file.
#[derive(Clone)]
pub struct TrialLog {
    file: Arc<Mutex<Option<std::fs::File>>>,
}

impl TrialLog {
    /// Opens (appends to) `path`. A log that cannot be opened degrades to no log.
    pub fn open(path: &Path) -> TrialLog {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok();
        TrialLog {
            file: Arc::new(Mutex::new(file)),
        }
    }

    /// Writes one timestamped line.
    pub fn line(&self, text: &str) {
        self.write(format!("{} {text}\n", chrono::Utc::now().format("%H:%M:%S%.3f")).as_bytes());
    }

    /// Writes a chunk of command output.
    pub fn output(&self, stream: &str, bytes: &[u8]) {
        // NUL-separated tool output would make the log a binary file to grep and editors.
        let text = String::from_utf8_lossy(bytes).replace('\0', " ");
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(&format!("  [{stream}] {line}\n"));
        }
        self.write(out.as_bytes());
    }

    fn write(&self, bytes: &[u8]) {
        if let Ok(mut guard) = self.file.lock()
            && let Some(file) = guard.as_mut()
        {
            let _ = file.write_all(bytes);
        }
    }
}
