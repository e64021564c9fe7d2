//! `record_manifest.jsonl`: the sha256 of every file of every trial, taken as the trial ended,
//! and of the job's config.json and lock.json, so a record changed after the run shows
//! (runner-only; Harbor writes none, and its readers ignore a file they do not know).
//!
//! A manifest beside lock.json rather than fields inside it: lock.json is Harbor's `JobLock`
//! (0.26 ignores unknown fields, but its equality and our `HarborLock` writer would have to
//! carry them), and one file hashing lock.json itself cannot live in it. The signature over
//! the manifest's exact bytes is `record_manifest.sig` (see [`super::record_signature`]).
//!
//! JSON Lines, appended to as the job goes, so a job neither keeps every trial's digests in
//! memory nor rewrites the whole file per trial (that made a job O(trials²)): a `header` line
//! first, then in any order `job_files` lines (config.json and lock.json each time runner
//! writes the lock; the last one holds), one `trial` line per trial as it ends (a later line of
//! the same trial, a rerun's, replaces it), and a `sidecars` line for a trial whose compose
//! sidecars' logs its teardown saved after the trial's result (written at the job's end, when
//! every teardown is done). The file name says the format; Harbor reads neither name.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest's file name in a job dir.
pub const RECORD_MANIFEST: &str = "record_manifest.jsonl";

/// The manifest's current `schema_version` (1 was one JSON document, `record_manifest.json`).
pub const RECORD_MANIFEST_SCHEMA: u32 = 2;

/// The top-level trial dir its own `sidecars` line records: the compose teardown saves the
/// sidecars' logs there after the trial's result is written (diagnostics, never a score).
pub const SIDECARS_DIR: &str = "sidecars";

/// The job files hashed into `job_files` (result.json is not: it is recomputed from the
/// trials, and the submission rules recompute every figure from the trials themselves).
pub const HASHED_JOB_FILES: [&str; 2] = ["config.json", "lock.json"];

/// Trial entries by trial name.
pub type TrialEntries = BTreeMap<String, TrialRecords>;

/// Files by `/`-separated path relative to the dir they were hashed in.
pub type FileDigests = BTreeMap<String, FileDigest>;

/// A job's record manifest as read: every line taken in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordManifest {
    /// [`RECORD_MANIFEST_SCHEMA`].
    pub schema_version: u32,
    /// The job's id (result.json `id`).
    pub job_id: String,
    /// The digest every entry uses: `sha256`.
    pub algorithm: String,
    /// config.json and lock.json as last written by the runner.
    pub job_files: FileDigests,
    /// Each finished trial's files, by trial name.
    pub trials: TrialEntries,
}

/// One trial's files as it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRecords {
    /// When they were hashed.
    pub recorded_at: DateTime<Utc>,
    /// Every file under the trial dir but `sidecars/`, by its path relative to it.
    pub files: FileDigests,
    /// The files under `sidecars/` once its teardown wrote them; `None` when the job ended
    /// before a `sidecars` line was written (not checked then).
    pub sidecars: Option<SidecarRecords>,
}

/// A trial's `sidecars/` as its teardown left it.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarRecords {
    /// When they were hashed.
    pub recorded_at: DateTime<Utc>,
    /// By path relative to `sidecars/`.
    pub files: FileDigests,
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "snake_case")]
pub enum ManifestLine {
    /// The first line.
    Header {
        /// [`RECORD_MANIFEST_SCHEMA`].
        schema_version: u32,
        /// The job's id.
        job_id: String,
        /// `sha256`.
        algorithm: String,
    },
    /// config.json and lock.json as just written.
    JobFiles {
        /// By file name.
        files: FileDigests,
    },
    /// A trial's files (but `sidecars/`) as it ended.
    Trial {
        /// The trial's name (its dir in the job).
        trial: String,
        /// When they were hashed.
        recorded_at: DateTime<Utc>,
        /// By path relative to the trial dir.
        files: FileDigests,
    },
    /// A trial's `sidecars/` once its teardown wrote it.
    Sidecars {
        /// The trial's name.
        trial: String,
        /// When they were hashed.
        recorded_at: DateTime<Utc>,
        /// By path relative to `sidecars/`.
        files: FileDigests,
    },
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

impl ManifestLine {
    /// The header line of the job `job_id`.
    pub fn header(job_id: &str) -> ManifestLine {
        ManifestLine::Header {
            schema_version: RECORD_MANIFEST_SCHEMA,
            job_id: job_id.to_owned(),
            algorithm: "sha256".into(),
        }
    }

    /// The `job_files` line of `job_dir`'s config.json and lock.json (an absent one is left
    /// out).
    pub fn job_files(job_dir: &Path) -> std::io::Result<ManifestLine> {
        let mut files = FileDigests::new();
        for name in HASHED_JOB_FILES {
            match file_digest(&job_dir.join(name)) {
                Ok(d) => {
                    files.insert(name.to_owned(), d);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ManifestLine::JobFiles { files })
    }

    /// The `trial` line of the trial `name` whose dir is `trial_dir` (it just ended).
    pub fn trial(name: &str, trial_dir: &Path) -> std::io::Result<ManifestLine> {
        Ok(ManifestLine::Trial {
            trial: name.to_owned(),
            recorded_at: Utc::now(),
            files: digest_tree(trial_dir)?,
        })
    }

    /// The `sidecars` line of the trial `name` whose dir is `trial_dir` (its teardown is done).
    pub fn sidecars(name: &str, trial_dir: &Path) -> std::io::Result<ManifestLine> {
        let mut files = FileDigests::new();
        walk(&trial_dir.join(SIDECARS_DIR), "", &mut files, false)?;
        Ok(ManifestLine::Sidecars {
            trial: name.to_owned(),
            recorded_at: Utc::now(),
            files,
        })
    }

    /// The line as written: compact JSON and a newline.
    pub fn to_line(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).expect("a manifest line serializes");
        bytes.push(b'\n');
        bytes
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

    /// Reads the manifest's bytes: a header line first, then the other lines in order. A last
    /// line without its newline is the one a crash cut while it was appended, and is left
    /// out (its trial then shows as not recorded); anything else that does not parse is an
    /// error naming the line.
    pub fn parse(bytes: &[u8]) -> Result<RecordManifest, String> {
        let complete = match bytes.iter().rposition(|b| *b == b'\n') {
            Some(end) => &bytes[..=end],
            None => &[][..],
        };
        let mut manifest: Option<RecordManifest> = None;
        for (i, line) in complete.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let parsed: ManifestLine =
                serde_json::from_slice(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            match (&mut manifest, parsed) {
                (
                    None,
                    ManifestLine::Header {
                        schema_version,
                        job_id,
                        algorithm,
                    },
                ) => {
                    manifest = Some(RecordManifest {
                        schema_version,
                        job_id,
                        algorithm,
                        ..RecordManifest::default()
                    })
                }
                (None, _) => return Err("line 1 is not the header".into()),
                (Some(m), line) => m.take(line).map_err(|e| format!("line {}: {e}", i + 1))?,
            }
        }
        manifest.ok_or_else(|| "empty: no header line".into())
    }

    /// Takes one line after the header.
    fn take(&mut self, line: ManifestLine) -> Result<(), String> {
        match line {
            ManifestLine::Header { .. } => return Err("a second header".into()),
            ManifestLine::JobFiles { files } => self.job_files = files,
            ManifestLine::Trial {
                trial,
                recorded_at,
                files,
            } => {
                let records = TrialRecords {
                    recorded_at,
                    files,
                    sidecars: None,
                };
                self.trials.insert(trial, records);
            }
            ManifestLine::Sidecars {
                trial,
                recorded_at,
                files,
            } => match self.trials.get_mut(&trial) {
                Some(entry) => entry.sidecars = Some(SidecarRecords { recorded_at, files }),
                None => return Err(format!("sidecars of trial {trial} before its trial line")),
            },
        }
        Ok(())
    }

    /// The manifest as lines: the header, `job_files`, then each trial's lines.
    pub fn lines(&self) -> Vec<ManifestLine> {
        let mut lines = vec![ManifestLine::Header {
            schema_version: self.schema_version,
            job_id: self.job_id.clone(),
            algorithm: self.algorithm.clone(),
        }];
        if !self.job_files.is_empty() {
            lines.push(ManifestLine::JobFiles {
                files: self.job_files.clone(),
            });
        }
        for (name, entry) in &self.trials {
            lines.extend(entry.lines(name));
        }
        lines
    }

    /// The serialized form: [`Self::lines`], one per line.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.lines()
            .iter()
            .flat_map(ManifestLine::to_line)
            .collect()
    }

    /// How the trial dir `trial_dir` differs from the entry of `name` (its `sidecars/` too once
    /// recorded); `None` when the manifest has no entry for `name`.
    pub fn trial_changes(
        &self,
        name: &str,
        trial_dir: &Path,
    ) -> Option<std::io::Result<Vec<FileChange>>> {
        let entry = self.trials.get(name)?;
        Some(entry.changes(trial_dir))
    }
}

impl TrialRecords {
    /// The entry as the lines that record it (for `name`).
    pub fn lines(&self, name: &str) -> Vec<ManifestLine> {
        let mut lines = vec![ManifestLine::Trial {
            trial: name.to_owned(),
            recorded_at: self.recorded_at,
            files: self.files.clone(),
        }];
        if let Some(sidecars) = &self.sidecars {
            lines.push(ManifestLine::Sidecars {
                trial: name.to_owned(),
                recorded_at: sidecars.recorded_at,
                files: sidecars.files.clone(),
            });
        }
        lines
    }

    /// How `trial_dir` differs from this entry, in path order.
    pub fn changes(&self, trial_dir: &Path) -> std::io::Result<Vec<FileChange>> {
        let mut changes = compare(&self.files, &digest_tree(trial_dir)?);
        if let Some(recorded) = &self.sidecars {
            let mut actual = FileDigests::new();
            let dir = trial_dir.join(SIDECARS_DIR);
            match walk(&dir, "", &mut actual, false) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => other?,
            }
            let prefixed = compare(&recorded.files, &actual)
                .into_iter()
                .map(|c| match c {
                    FileChange::Changed(p) => FileChange::Changed(format!("{SIDECARS_DIR}/{p}")),
                    FileChange::Removed(p) => FileChange::Removed(format!("{SIDECARS_DIR}/{p}")),
                    FileChange::Added(p) => FileChange::Added(format!("{SIDECARS_DIR}/{p}")),
                });
            changes.extend(prefixed);
            changes.sort();
        }
        Ok(changes)
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

/// Every regular file and symlink under the trial dir `dir` but its `sidecars/`, by
/// `/`-separated relative path, with its digest. Temp files of an interrupted atomic write
/// (`.NAME.tmp-…`) are not records.
pub fn digest_tree(dir: &Path) -> std::io::Result<FileDigests> {
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out, true)?;
    Ok(out)
}

fn walk(
    dir: &Path,
    prefix: &str,
    out: &mut FileDigests,
    skip_sidecars: bool,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(".tmp-") {
            continue;
        }
        let rel = format!("{prefix}{name}");
        let kind = entry.file_type()?;
        if skip_sidecars && prefix.is_empty() && kind.is_dir() && name == SIDECARS_DIR {
            continue;
        }
        if kind.is_dir() {
            walk(&entry.path(), &format!("{rel}/"), out, false)?;
        } else if kind.is_file() || kind.is_symlink() {
            out.insert(rel, file_digest(&entry.path())?);
        }
    }
    Ok(())
}

/// How `actual` differs from `recorded`, in path order.
pub fn compare(recorded: &FileDigests, actual: &FileDigests) -> Vec<FileChange> {
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

    fn manifest_of(lines: &[ManifestLine]) -> Vec<u8> {
        lines.iter().flat_map(ManifestLine::to_line).collect()
    }

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
        let bytes = manifest_of(&[
            ManifestLine::header("job"),
            ManifestLine::trial("t1", t).unwrap(),
        ]);
        let m = RecordManifest::parse(&bytes).unwrap();
        let recorded = &m.trials["t1"].files;
        assert_eq!(
            recorded.keys().collect::<Vec<_>>(),
            ["gone.txt", "result.json", "verifier/reward.txt"]
        );
        assert!(m.trial_changes("t1", t).unwrap().unwrap().is_empty());
        std::fs::write(t.join("verifier/reward.txt"), "1").unwrap();
        std::fs::remove_file(t.join("gone.txt")).unwrap();
        std::fs::create_dir_all(t.join("agent")).unwrap();
        std::fs::write(t.join("agent/trajectory.json"), "{}").unwrap();
        let changes = m.trial_changes("t1", t).unwrap().unwrap();
        assert_eq!(
            describe_changes(&changes),
            "verifier/reward.txt changed, gone.txt removed, agent/trajectory.json added"
        );
        assert_eq!(RecordManifest::parse(&m.to_bytes()).unwrap(), m);
    }

    #[test]
    fn a_later_line_replaces_an_earlier_and_sidecars_are_checked_once_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::write(t.join("result.json"), "first").unwrap();
        let first = ManifestLine::trial("t1", t).unwrap();
        std::fs::write(t.join("result.json"), "rerun").unwrap();
        std::fs::create_dir_all(t.join("sidecars")).unwrap();
        std::fs::write(t.join("sidecars/db.log"), "teardown").unwrap();
        let mut lines = vec![
            ManifestLine::header("job"),
            first,
            ManifestLine::trial("t1", t).unwrap(),
        ];
        let m = RecordManifest::parse(&manifest_of(&lines)).unwrap();
        // Without a sidecars line the sidecars' logs are not vouched for, nor checked.
        std::fs::write(t.join("sidecars/db.log"), "edited").unwrap();
        assert!(m.trial_changes("t1", t).unwrap().unwrap().is_empty());
        lines.push(ManifestLine::sidecars("t1", t).unwrap());
        let m = RecordManifest::parse(&manifest_of(&lines)).unwrap();
        assert!(m.trial_changes("t1", t).unwrap().unwrap().is_empty());
        std::fs::write(t.join("sidecars/db.log"), "edited again").unwrap();
        assert_eq!(
            m.trial_changes("t1", t).unwrap().unwrap(),
            vec![FileChange::Changed("sidecars/db.log".into())]
        );
        assert_eq!(RecordManifest::parse(&m.to_bytes()).unwrap(), m);
    }

    #[test]
    fn a_line_cut_by_a_crash_is_left_out_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("result.json"), "{}").unwrap();
        let mut bytes = manifest_of(&[ManifestLine::header("job")]);
        let trial = ManifestLine::trial("t1", dir.path()).unwrap().to_line();
        bytes.extend_from_slice(&trial[..trial.len() / 2]);
        let m = RecordManifest::parse(&bytes).unwrap();
        assert!(m.trials.is_empty());
        bytes.push(b'\n');
        let err = RecordManifest::parse(&bytes).unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
        let sidecars = ManifestLine::sidecars("t2", dir.path());
        assert!(sidecars.is_err(), "no sidecars dir: nothing to record");
        assert!(RecordManifest::parse(b"").is_err());
    }
}
