//! The record of every connection attempt: one JSON line per attempt in the phase's log
//! (`agent/network.jsonl`, `verifier/network.jsonl`), and counts per phase for `result.json`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One attempt through the proxy. Never holds a body, a path or a header: only where to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// When the request arrived.
    pub time: DateTime<Utc>,
    /// The phase it arrived in (`agent`, `verifier`, `setup`, a step's name...).
    pub phase: String,
    /// `CONNECT`, `GET`, ...; empty when the request could not be read.
    pub method: String,
    /// The host asked for (as asked, lower case).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// Whether the proxy connected it.
    pub allowed: bool,
    /// Why it was refused (or why the connection failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The address connected to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Bytes from the container to the destination.
    pub bytes_sent: u64,
    /// Bytes from the destination to the container.
    pub bytes_received: u64,
}

/// How many attempts a phase made and how many were refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseCounts {
    /// Every attempt, allowed or not.
    pub attempts: u64,
    /// Attempts refused by the policy or failing to connect.
    pub refused: u64,
}

/// Appends `attempt` as one line to `log` (created with its directory when missing).
pub(crate) fn append(log: &Path, attempt: &Attempt) -> std::io::Result<()> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut line = serde_json::to_vec(attempt).map_err(std::io::Error::other)?;
    line.push(b'\n');
    // One write of the whole line in append mode: lines from concurrent connections never
    // interleave.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?
        .write_all(&line)
}

/// Adds `attempt` to its phase's counts.
pub(crate) fn count(counts: &mut BTreeMap<String, PhaseCounts>, attempt: &Attempt) {
    let phase = counts.entry(attempt.phase.clone()).or_default();
    phase.attempts += 1;
    if !attempt.allowed {
        phase.refused += 1;
    }
}
