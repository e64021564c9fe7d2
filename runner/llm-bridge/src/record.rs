//! The per-trial call record under `<trial>/llm/`:
//!
//! ```text
//! llm/calls.jsonl                 one JSON line per call (CallRecord), appended as calls end
//! llm/calls/000001.request.json   the request body as the agent sent it, secrets redacted
//! llm/calls/000001.response.json  the response body (.sse when streamed), secrets redacted
//! llm/usage.json                  the trial's TrialUsage, written atomically on close
//! ```
//!
//! It lives beside `agent/`, not in it: the agent's `/logs/agent` is downloaded into
//! `<trial>/agent/`, and nothing the agent writes may overwrite the record of its own calls.
//!
//! Bodies are written as they pass, chunk by chunk, never held whole; each file stops at a cap
//! and its call record says it was cut. The whole record of a trial is bounded too
//! (`BridgeConfig::max_recorded_bytes_per_trial`): past it no more bodies are written and
//! refused calls get no line. Request bodies are written only for calls that pass every check,
//! so refused calls cost a line at most.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::redact::{Redactor, Secrets};
use crate::usage::{Endpoint, Usage};

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// Forwarded; the upstream answered 2xx and the body was passed on whole.
    Ok,
    /// Forwarded; the upstream answered with an error status.
    UpstreamError,
    /// Refused by the bridge (auth, model, budget, size, bad request); never forwarded.
    Refused,
    /// The upstream could not be reached, or its response broke off.
    UpstreamUnreachable,
    /// The agent closed the connection before the response ended.
    ClientDisconnected,
    /// Cut off because the trial closed while the call was still running.
    Aborted,
    /// The bridge itself failed (a panic): an infrastructure error.
    BridgeError,
}

/// One line of `calls.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// 1-based call number within the trial; names the body files.
    pub seq: u64,
    /// When the request arrived.
    pub started_at: DateTime<Utc>,
    /// From arrival to the last byte passed on (or the refusal).
    pub duration_ms: f64,
    /// From arrival to the upstream's response headers.
    pub upstream_headers_ms: Option<f64>,
    /// The route called, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The wire format, when the route is a model call.
    pub endpoint: Option<Endpoint>,
    /// Whether the agent asked for a stream.
    pub stream: bool,
    /// The `model` the agent sent.
    pub model_requested: Option<String>,
    /// The declared model it matched.
    pub model_declared: Option<String>,
    /// The model the upstream says answered.
    pub model_reported: Option<String>,
    /// The provider it was sent to.
    pub provider: Option<String>,
    /// The HTTP status the agent got.
    pub status: u16,
    /// How the call ended.
    pub outcome: CallOutcome,
    /// For refusals: which kind (`model_not_allowed`, `budget_exhausted`, ...).
    pub refusal: Option<String>,
    /// Client-side fields the bridge dropped before forwarding (Codex's `client_metadata`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_fields: Vec<&'static str>,
    /// A message for refusals and failures, with secrets redacted.
    pub error: Option<String>,
    /// Usage as the upstream reported it; `None` when it reported none.
    pub usage: Option<Usage>,
    /// What the budgets were charged instead, when the usage never arrived whole (an aborted
    /// or cut-off stream): the reported input or the request's size, and the output cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charged: Option<Usage>,
    /// Cost in USD; `None` when the model has no price (tokens only) or usage is unknown.
    pub cost_usd: Option<f64>,
    /// Whether the price table has this model.
    pub price_known: bool,
    /// The request body file, relative to `llm/`.
    pub request_body: Option<String>,
    /// Bytes of the request body.
    pub request_bytes: u64,
    /// The response body file, relative to `llm/`.
    pub response_body: Option<String>,
    /// Bytes of the response body passed to the agent.
    pub response_bytes: u64,
    /// True when a body file was cut at the recording cap.
    pub body_truncated: bool,
}

/// Writes a trial's `llm/` directory.
#[derive(Debug)]
pub struct TrialRecorder {
    dir: PathBuf,
    calls: Mutex<File>,
    secrets: Arc<Secrets>,
    max_body: u64,
    /// Bytes written so far to every file of the record.
    written: Arc<AtomicU64>,
    max_total: u64,
}

impl TrialRecorder {
    /// Creates `llm_dir` and `llm_dir/calls/` and opens `calls.jsonl` for appending. Each
    /// body file stops at `max_body` bytes, the whole record at `max_total`.
    pub fn create(
        llm_dir: &Path,
        secrets: Arc<Secrets>,
        max_body: u64,
        max_total: u64,
    ) -> io::Result<TrialRecorder> {
        std::fs::create_dir_all(llm_dir.join("calls"))?;
        let calls = OpenOptions::new()
            .create(true)
            .append(true)
            .open(llm_dir.join("calls.jsonl"))?;
        Ok(TrialRecorder {
            dir: llm_dir.to_owned(),
            calls: Mutex::new(calls),
            secrets,
            max_body,
            written: Arc::new(AtomicU64::new(0)),
            max_total,
        })
    }

    /// True once the record has reached its size cap.
    pub fn full(&self) -> bool {
        self.written.load(Ordering::Relaxed) >= self.max_total
    }

    /// The `llm/` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens a body file `calls/<seq>.<kind>.<ext>`.
    pub fn body_file(&self, seq: u64, kind: &str, ext: &str) -> io::Result<BodyFile> {
        let relative = format!("calls/{seq:06}.{kind}.{ext}");
        let file = File::create(self.dir.join(&relative))?;
        Ok(BodyFile {
            relative,
            file: BufWriter::with_capacity(64 * 1024, file),
            redactor: self.secrets.stream(),
            written: 0,
            seen: 0,
            max: self.max_body,
            trial_written: self.written.clone(),
            trial_max: self.max_total,
            truncated: false,
            error: None,
        })
    }

    /// Appends one call's line. One `write_all` of a whole line on an `O_APPEND` file, under a
    /// lock, so concurrent calls never interleave within a line. The line counts towards the
    /// record's cap; it is always written (a forwarded call's line is the only account of what
    /// it spent), so callers skip optional lines once [`TrialRecorder::full`] says so.
    pub fn append(&self, record: &CallRecord) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut calls = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.written.fetch_add(line.len() as u64, Ordering::Relaxed);
        calls.write_all(&line)
    }

    /// Flushes `calls.jsonl` to disk.
    pub fn sync(&self) -> io::Result<()> {
        let calls = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        calls.sync_all()
    }
}

/// A body file being written: redacted as it goes and cut at the cap.
#[derive(Debug)]
pub struct BodyFile {
    relative: String,
    file: BufWriter<File>,
    redactor: Redactor,
    written: u64,
    seen: u64,
    max: u64,
    /// The trial record's running total and cap, shared by every body file of the trial.
    trial_written: Arc<AtomicU64>,
    trial_max: u64,
    truncated: bool,
    error: Option<io::Error>,
}

/// What a finished body file holds.
#[derive(Debug)]
pub struct BodySummary {
    /// Path relative to `llm/`.
    pub relative: String,
    /// Bytes that passed (before redaction and the cap).
    pub bytes: u64,
    /// Whether the file was cut at the cap.
    pub truncated: bool,
    /// A write failure, if any: the call still goes on, its record says the body is partial.
    pub error: Option<String>,
}

impl BodyFile {
    /// Writes the next chunk. A failing disk never fails the call; it is remembered and
    /// reported in the record instead.
    pub fn write(&mut self, chunk: &[u8]) {
        self.seen += chunk.len() as u64;
        let redacted = self.redactor.push(chunk);
        self.write_capped(&redacted);
    }

    fn write_capped(&mut self, bytes: &[u8]) {
        if self.error.is_some() || self.truncated {
            return;
        }
        let trial_room = self
            .trial_max
            .saturating_sub(self.trial_written.load(Ordering::Relaxed));
        let room = self.max.saturating_sub(self.written).min(trial_room) as usize;
        let take = bytes.len().min(room);
        if let Err(error) = self.file.write_all(&bytes[..take]) {
            self.error = Some(error);
            return;
        }
        self.written += take as u64;
        self.trial_written.fetch_add(take as u64, Ordering::Relaxed);
        if take < bytes.len() {
            self.truncated = true;
        }
    }

    /// Flushes what the redactor held back and closes the file.
    pub fn finish(mut self) -> BodySummary {
        let tail = self.redactor.finish();
        self.write_capped(&tail);
        if self.error.is_none()
            && let Err(error) = self.file.flush()
        {
            self.error = Some(error);
        }
        BodySummary {
            relative: self.relative,
            bytes: self.seen,
            truncated: self.truncated,
            error: self.error.map(|e| e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_redacted_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = Arc::new(Secrets::new(["sk-upstream-key-123", "runner-trial-tok"]));
        let recorder = TrialRecorder::create(&dir.path().join("llm"), secrets, 40, 75).unwrap();
        let mut body = recorder.body_file(7, "request", "json").unwrap();
        body.write(b"{\"a\":\"sk-upstream-");
        body.write(b"key-123\",\"t\":\"runner-trial-tok\"}");
        let summary = body.finish();
        assert_eq!(summary.relative, "calls/000007.request.json");
        assert!(!summary.truncated);
        let text = std::fs::read_to_string(dir.path().join("llm").join(&summary.relative)).unwrap();
        assert_eq!(text, "{\"a\":\"[REDACTED]\",\"t\":\"[REDACTED]\"}");

        let mut big = recorder.body_file(8, "response", "sse").unwrap();
        big.write(&[b'x'; 100]);
        let summary = big.finish();
        assert!(summary.truncated);
        assert_eq!(summary.bytes, 100);
        assert_eq!(
            std::fs::metadata(dir.path().join("llm/calls/000008.response.sse"))
                .unwrap()
                .len(),
            40
        );
        // The trial's cap (75) is reached: 35 + 40 bytes were written, the next body is empty.
        assert!(recorder.full());
        let mut after = recorder.body_file(9, "request", "json").unwrap();
        after.write(b"more");
        assert!(after.finish().truncated);
        assert_eq!(
            std::fs::metadata(dir.path().join("llm/calls/000009.request.json"))
                .unwrap()
                .len(),
            0
        );
    }
}
