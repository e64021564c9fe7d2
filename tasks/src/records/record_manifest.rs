//! `record_manifest.json`: the sha256 of every file of every trial, taken as the trial ended,
//! and of the job's config.json and lock.json, so a record changed after the run shows
//! (runner-only; Harbor writes none, and its readers ignore a file they do not know).
//!
//! A manifest beside lock.json rather than fields inside it: lock.json is Harbor's `JobLock`
//! (0.26 ignores unknown fields, but its equality and our `HarborLock` writer would have to
//! carry them), and one file hashing lock.json itself cannot live in it. The signature over
//! the manifest's exact bytes is `record_manifest.sig` (see [`super::record_signature`]).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest's file name in a job dir.
pub const RECORD_MANIFEST: &str = "record_manifest.json";

/// The manifest's current `schema_version`.
pub const RECORD_MANIFEST_SCHEMA: u32 = 1;

/// Top-level trial dirs not recorded: the compose teardown saves the sidecars' logs there,
/// which may finish after the trial's result is written (diagnostics, never a score).
pub const UNRECORDED_DIRS: [&str; 1] = ["sidecars"];

/// The job files hashed into `job_files` (result.json is not: it is recomputed from the
/// trials, and the submission rules recompute every figure from the trials themselves).
pub const HASHED_JOB_FILES: [&str; 2] = ["config.json", "lock.json"];

/// Trial entries by trial name.
pub type TrialEntries = BTreeMap<String, TrialRecords>;

/// A job's record manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordManifest {
    /// [`RECORD_MANIFEST_SCHEMA`].
    pub schema_version: u32,
    /// The job's id (result.json `id`).
    pub job_id: String,
    /// The digest every entry uses: `sha256`.
    pub algorithm: String,
    /// config.json and lock.json as last written by the runner.
    #[serde(default)]
    pub job_files: BTreeMap<String, FileDigest>,
    /// Each finished trial's files, by trial name.
    #[serde(default)]
    pub trials: TrialEntries,
}

/// One trial's files as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecords {
    /// When they were hashed.
    pub recorded_at: DateTime<Utc>,
    /// Every file under the trial dir, by its path relative to it (`/`-separated).
    pub files: BTreeMap<String, FileDigest>,
}

/// One file's digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// Hex sha256 of the bytes (of the link's target path for a symlink).
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// A symlink (never followed: its target may be outside the job).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub symlink: bool,
}

/// How a file differs from what the manifest recorded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileChange {
    /// Its bytes differ.
    Changed(String),
    /// Recorded, now gone.
    Removed(String),
    /// Present, never recorded.
    Added(String),
}

impl std::fmt::Display for FileChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileChange::Changed(p) => write!(f, "{p} changed"),
            FileChange::Removed(p) => write!(f, "{p} removed"),
            FileChange::Added(p) => write!(f, "{p} added"),
        }
    }
}

impl RecordManifest {
    /// An empty manifest for the job `job_id`.
    pub fn new(job_id: &str) -> RecordManifest {
        RecordManifest {
            schema_version: RECORD_MANIFEST_SCHEMA,
            job_id: job_id.to_owned(),
            algorithm: "sha256".into(),
            job_files: BTreeMap::new(),
            trials: BTreeMap::new(),
        }
    }

    /// Hashes `job_dir`'s config.json and lock.json into `job_files` (an absent one is left out).
    pub fn record_job_files(&mut self, job_dir: &Path) -> std::io::Result<()> {
        for name in HASHED_JOB_FILES {
            match file_digest(&job_dir.join(name)) {
                Ok(d) => {
                    self.job_files.insert(name.to_owned(), d);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.job_files.remove(name);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Hashes the trial dir `trial_dir` as the entry of `name`.
    pub fn record_trial(&mut self, name: &str, trial_dir: &Path) -> std::io::Result<()> {
        let files = digest_tree(trial_dir)?;
        self.trials.insert(
            name.to_owned(),
            TrialRecords {
                recorded_at: Utc::now(),
                files,
            },
        );
        Ok(())
    }

    /// The serialized form written to disk (and signed): pretty JSON, keys in order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest serializes");
        bytes.push(b'\n');
        bytes
    }
}

/// The digest of one file (a symlink's target path, never followed).
pub fn file_digest(path: &Path) -> std::io::Result<FileDigest> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path)?;
        let bytes = target.as_os_str().as_encoded_bytes();
        return Ok(FileDigest {
            sha256: hex::encode(Sha256::digest(bytes)),
            size: bytes.len() as u64,
            symlink: true,
        });
    }
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => {
                hasher.update(&buf[..n]);
                size += n as u64;
            }
        }
    }
    Ok(FileDigest {
        sha256: hex::encode(hasher.finalize()),
        size,
        symlink: false,
    })
}

/// Every regular file and symlink under `dir`, by `/`-separated relative path, with its
/// digest. Temp files of an interrupted atomic write (`.NAME.tmp-…`) are not records.
pub fn digest_tree(dir: &Path) -> std::io::Result<BTreeMap<String, FileDigest>> {
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, FileDigest>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(".tmp-") {
            continue;
        }
        let rel = format!("{prefix}{name}");
        let kind = entry.file_type()?;
        if prefix.is_empty() && kind.is_dir() && UNRECORDED_DIRS.contains(&name.as_str()) {
            continue;
        }
        if kind.is_dir() {
            walk(&entry.path(), &format!("{rel}/"), out)?;
        } else if kind.is_file() || kind.is_symlink() {
            out.insert(rel, file_digest(&entry.path())?);
        }
    }
    Ok(())
}

/// How `actual` differs from `recorded`, in path order.
pub fn compare(
    recorded: &BTreeMap<String, FileDigest>,
    actual: &BTreeMap<String, FileDigest>,
) -> Vec<FileChange> {
    let mut changes = Vec::new();
    for (path, digest) in recorded {
        match actual.get(path) {
            None => changes.push(FileChange::Removed(path.clone())),
            Some(a) if a != digest => changes.push(FileChange::Changed(path.clone())),
            Some(_) => {}
        }
    }
    for path in actual.keys() {
        if !recorded.contains_key(path) {
            changes.push(FileChange::Added(path.clone()));
        }
    }
    changes.sort();
    changes
}

/// One line naming `changes` (the first few, then how many more).
pub fn describe_changes(changes: &[FileChange]) -> String {
    const SHOWN: usize = 6;
    let mut text = changes
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if changes.len() > SHOWN {
        text.push_str(&format!(" and {} more", changes.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_removed_or_added_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::create_dir_all(t.join("verifier")).unwrap();
        std::fs::write(t.join("result.json"), "{}").unwrap();
        std::fs::write(t.join("verifier/reward.txt"), "0").unwrap();
        std::fs::write(t.join("gone.txt"), "x").unwrap();
        std::fs::write(t.join(".result.json.tmp-abc"), "half").unwrap();
        std::fs::create_dir_all(t.join("sidecars")).unwrap();
        std::fs::write(t.join("sidecars/db.log"), "late").unwrap();
        let mut m = RecordManifest::new("job");
        m.record_trial("t1", t).unwrap();
        let recorded = &m.trials["t1"].files;
        assert_eq!(
            recorded.keys().collect::<Vec<_>>(),
            ["gone.txt", "result.json", "verifier/reward.txt"]
        );
        assert!(compare(recorded, &digest_tree(t).unwrap()).is_empty());
        std::fs::write(t.join("verifier/reward.txt"), "1").unwrap();
        std::fs::remove_file(t.join("gone.txt")).unwrap();
        std::fs::create_dir_all(t.join("agent")).unwrap();
        std::fs::write(t.join("agent/trajectory.json"), "{}").unwrap();
        let changes = compare(recorded, &digest_tree(t).unwrap());
        assert_eq!(
            describe_changes(&changes),
            "verifier/reward.txt changed, gone.txt removed, agent/trajectory.json added"
        );
        let back: RecordManifest = serde_json::from_slice(&m.to_bytes()).unwrap();
        assert_eq!(back, m);
    }
}
