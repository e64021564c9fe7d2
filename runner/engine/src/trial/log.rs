//! `trial.log`: a plain timestamped log of what the runner did in a trial, with the streamed
//! output of every command, up to a cap: past it command output is dropped after one marker
//! line (the runner's own lines still go in, so the log always says how the trial ended).

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A shared handle on a trial's log file.
#[derive(Clone)]
pub struct TrialLog {
    state: Arc<Mutex<LogState>>,
}

struct LogState {
    file: Option<std::fs::File>,
    written: u64,
    cap: u64,
    truncated: bool,
}

impl TrialLog {
    /// Opens (appends to) `path`, holding at most `cap` bytes of command output. A log that
    /// cannot be opened degrades to no log.
    pub fn open(path: &Path, cap: u64) -> TrialLog {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok();
        let written = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        TrialLog {
            state: Arc::new(Mutex::new(LogState {
                file,
                written,
                cap,
                truncated: false,
            })),
        }
    }

    /// Writes one timestamped line (always, even past the cap).
    pub fn line(&self, text: &str) {
        let line = format!("{} {text}\n", chrono::Utc::now().format("%H:%M:%S%.3f"));
        self.write(line.as_bytes(), true);
    }

    /// Writes a chunk of command output, unless the cap has been reached.
    pub fn output(&self, stream: &str, bytes: &[u8]) {
        if self.is_truncated() {
            // Checked before formatting: endless output must not cost CPU per chunk either.
            return;
        }
        // NUL-separated tool output would make the log a binary file to grep and editors.
        let text = String::from_utf8_lossy(bytes).replace('\0', " ");
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(&format!("  [{stream}] {line}\n"));
        }
        self.write(out.as_bytes(), false);
    }

    /// Ends the log: every later write is dropped, so the file is final once the trial's
    /// record is written and hashed into the job's `record_manifest.jsonl`. What could still
    /// write is the container's removal, which runs in the background after teardown (its
    /// failure is the job's sweep's to report, as it removes what is left).
    pub fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.file = None;
        }
    }

    /// True once command output was dropped at the cap.
    pub fn is_truncated(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.truncated)
    }

    /// The cap on command output, in bytes.
    pub fn cap(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.cap)
    }

    fn write(&self, bytes: &[u8], always: bool) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let state = &mut *state;
        let Some(file) = state.file.as_mut() else {
            return;
        };
        let room = state.cap.saturating_sub(state.written);
        if always || (bytes.len() as u64) <= room {
            if file.write_all(bytes).is_ok() {
                state.written += bytes.len() as u64;
            }
            return;
        }
        if !state.truncated {
            state.truncated = true;
            let cut = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
            let marker = format!(
                "\n[runner: trial.log reached its cap of {} bytes; further command output is dropped]\n",
                state.cap
            );
            let _ = file.write_all(&bytes[..cut]);
            let _ = file.write_all(marker.as_bytes());
            state.written += (cut + marker.len()) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_cap_is_dropped_after_one_marker_but_runner_lines_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trial.log");
        let log = TrialLog::open(&path, 200);
        for _ in 0..100 {
            log.output("stdout", b"y\ny\ny\n");
        }
        assert!(log.is_truncated());
        log.line("removed container");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("reached its cap").count(), 1, "{text}");
        assert!(text.ends_with("removed container\n"), "{text}");
        assert!(text.len() < 200 + 200, "{}", text.len());
    }

    #[test]
    fn a_closed_log_takes_no_more_lines_or_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trial.log");
        let log = TrialLog::open(&path, 1 << 20);
        log.line("outcome: success");
        let late = log.clone();
        log.close();
        late.line("removing abc failed");
        late.output("runner", b"late output\n");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("outcome: success\n"), "{text}");
        assert!(
            !text.contains("late") && !text.contains("removing"),
            "{text}"
        );
    }
}
