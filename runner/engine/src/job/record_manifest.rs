//! The job's `record_manifest.jsonl` as the job runs (the format: [`tasks::records::record_manifest`]):
//! each trial's files hashed and appended as one line as the trial ends (the job recorder calls
//! [`ManifestRecorder::trial_finished`] on `TrialFinished`, after its result.json is durable),
//! config.json and lock.json each time the recorder writes the lock, each compose trial's
//! `sidecars/` once every teardown is done (the job's end), and the signature
//! (`--signing-key`) over the finished manifest when the job ends or a merge writes it.
//!
//! Each line is appended and fsynced on its own, so the job keeps no trial's digests in memory
//! and writing the manifest is O(1) per trial.

use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use tasks::atomic::write_atomic;
use tasks::records::record_manifest::{ManifestLine, SIDECARS_DIR, TrialEntries};
use tasks::records::record_signature::{RECORD_SIGNATURE, SigningKey, sign};
use tasks::records::{RECORD_MANIFEST, RecordManifest};

/// Appends a job's record manifest.
pub struct ManifestRecorder {
    dir: PathBuf,
    /// The manifest opened to append, or why it could not be written.
    file: Result<File, String>,
    /// A write failed part way: the next line starts on a fresh line.
    torn: bool,
}

impl ManifestRecorder {
    /// The manifest of the job in `dir`: on a resume, the entries of the trials found complete
    /// (`done`) are kept, and a complete trial without one (its job ended between its result
    /// and its line) is hashed now; other entries are dropped (those trials run again). The
    /// kept lines are written anew once (temp file, fsync, rename); every later line is
    /// appended.
    pub fn open(dir: &Path, job_id: &str, done: &HashSet<String>) -> ManifestRecorder {
        let mut recorder = ManifestRecorder {
            dir: dir.to_owned(),
            file: Err(String::new()),
            torn: false,
        };
        let unrecorded = match start(dir, job_id, done) {
            Ok((file, unrecorded)) => {
                recorder.file = Ok(file);
                unrecorded
            }
            Err(e) => {
                // Reported by the first line appended: the job's first lock.json write.
                recorder.file = Err(format!("cannot write {RECORD_MANIFEST}: {e}"));
                Vec::new()
            }
        };
        for name in unrecorded {
            // Unreadable now means unreadable at validation too: it shows there.
            let _ = recorder.trial_finished(&name);
        }
        recorder
    }

    /// Hashes the trial `name`'s dir (it just ended) and appends its line.
    pub fn trial_finished(&mut self, name: &str) -> std::io::Result<()> {
        let line = ManifestLine::trial(name, &self.dir.join(name))?;
        self.append(&[line])
    }

    /// Hashes config.json and lock.json (just written) and appends their line.
    pub fn job_files_written(&mut self) -> std::io::Result<()> {
        let line = ManifestLine::job_files(&self.dir)?;
        self.append(&[line])
    }

    /// Appends the trials' entries wholesale (a merge: each from the part it was taken from).
    pub fn set_trials(&mut self, trials: TrialEntries) -> std::io::Result<()> {
        let lines: Vec<ManifestLine> = trials
            .iter()
            .flat_map(|(name, entry)| entry.lines(name))
            .collect();
        self.append(&lines)
    }

    /// Every teardown of the job is done: appends a `sidecars` line for each recorded trial
    /// whose `sidecars/` has none yet. Trial dirs are listed first (few have sidecars), then the
    /// manifest is read line by line, so nothing per trial is held.
    pub fn teardowns_done(&mut self) -> std::io::Result<()> {
        let mut with_sidecars: BTreeSet<String> = BTreeSet::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.path().join(SIDECARS_DIR).is_dir() {
                with_sidecars.insert(entry.file_name().to_string_lossy().into_owned());
            }
        }
        if with_sidecars.is_empty() {
            return Ok(());
        }
        let mut due = BTreeSet::new();
        let reader = std::io::BufReader::new(File::open(self.dir.join(RECORD_MANIFEST))?);
        for line in reader.lines() {
            let Ok(line) = serde_json::from_str::<LineKind>(&line?) else {
                continue;
            };
            match (line.line.as_str(), line.trial) {
                ("trial", Some(t)) if with_sidecars.contains(&t) => due.insert(t),
                ("sidecars", Some(t)) => due.remove(&t),
                _ => false,
            };
        }
        let lines = due
            .iter()
            .map(|name| ManifestLine::sidecars(name, &self.dir.join(name)))
            .collect::<std::io::Result<Vec<_>>>()?;
        self.append(&lines)
    }

    /// Appends `lines` and makes them durable.
    fn append(&mut self, lines: &[ManifestLine]) -> std::io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let file = self
            .file
            .as_mut()
            .map_err(|e| std::io::Error::other(e.clone()))?;
        let mut bytes = Vec::new();
        if self.torn {
            bytes.push(b'\n');
        }
        for line in lines {
            bytes.extend(line.to_line());
        }
        self.torn = true;
        file.write_all(&bytes)?;
        file.sync_data()?;
        self.torn = false;
        Ok(())
    }
}

/// Writes the kept part of an earlier manifest in `dir` (see [`ManifestRecorder::open`]) and
/// opens it to append; returns it with the complete trials it holds no entry for.
fn start(dir: &Path, job_id: &str, done: &HashSet<String>) -> std::io::Result<(File, Vec<String>)> {
    let path = dir.join(RECORD_MANIFEST);
    let earlier = std::fs::read(&path)
        .ok()
        .and_then(|bytes| RecordManifest::parse(&bytes).ok());
    let mut kept = RecordManifest::new(job_id);
    let mut unrecorded = Vec::new();
    // Without an earlier manifest (a job of a runner that wrote none, or a merge's new dir)
    // nothing is hashed now: files found later are not vouched for as the trial's end.
    if let Some(earlier) = earlier {
        kept.trials = earlier
            .trials
            .into_iter()
            .filter(|(name, _)| done.contains(name))
            .collect();
        unrecorded = done
            .iter()
            .filter(|name| !kept.trials.contains_key(*name))
            .cloned()
            .collect();
    }
    std::fs::create_dir_all(dir)?;
    write_atomic(&path, &kept.to_bytes())?;
    Ok((File::options().append(true).open(&path)?, unrecorded))
}

/// What [`ManifestRecorder::teardowns_done`] reads of a line (its digests are skipped unread).
#[derive(serde::Deserialize)]
struct LineKind {
    line: String,
    trial: Option<String>,
}

/// Signs the job in `dir`'s manifest with `key` (`record_manifest.sig`). A job without a
/// manifest is an error: there would be nothing the signature vouches for.
pub fn sign_job(dir: &Path, key: &SigningKey) -> std::io::Result<()> {
    let bytes = std::fs::read(dir.join(RECORD_MANIFEST))?;
    let signature = sign(key, &bytes);
    tasks::atomic::write_json_atomic(&dir.join(RECORD_SIGNATURE), &signature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tasks::records::record_manifest::FileChange;

    fn read(dir: &Path) -> RecordManifest {
        RecordManifest::parse(&std::fs::read(dir.join(RECORD_MANIFEST)).unwrap()).unwrap()
    }

    #[test]
    fn a_resume_keeps_complete_trials_hashes_unrecorded_ones_and_drops_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for t in ["a", "b", "c"] {
            std::fs::create_dir_all(dir.path().join(t)).unwrap();
            std::fs::write(dir.path().join(t).join("result.json"), t).unwrap();
        }
        let all: HashSet<String> = ["a", "b", "c"].map(str::to_owned).into();
        // No earlier manifest: nothing found is vouched for.
        ManifestRecorder::open(dir.path(), "job", &all);
        assert!(read(dir.path()).trials.is_empty());
        let mut first = ManifestRecorder::open(dir.path(), "job", &HashSet::new());
        first.trial_finished("a").unwrap();
        first.trial_finished("c").unwrap();
        // A line appended, not the file rewritten: what was there stays byte for byte.
        let before = std::fs::read(dir.path().join(RECORD_MANIFEST)).unwrap();
        first.job_files_written().unwrap();
        let after = std::fs::read(dir.path().join(RECORD_MANIFEST)).unwrap();
        assert!(after.starts_with(&before) && after.len() > before.len());
        drop(first);
        // "a" changed after it was recorded: a resume keeps the recorded hash, never the new.
        std::fs::write(dir.path().join("a/result.json"), "forged").unwrap();
        let done: HashSet<String> = ["a", "b"].map(str::to_owned).into();
        ManifestRecorder::open(dir.path(), "job", &done);
        let m = read(dir.path());
        assert_eq!(m.trials.keys().collect::<Vec<_>>(), ["a", "b"]);
        let changes = m
            .trial_changes("a", &dir.path().join("a"))
            .unwrap()
            .unwrap();
        assert_eq!(changes, vec![FileChange::Changed("result.json".into())]);
        assert!(m.trial_changes("c", &dir.path().join("c")).is_none());
    }

    #[test]
    fn sidecars_are_recorded_once_their_teardown_is_done() {
        let dir = tempfile::tempdir().unwrap();
        for t in ["plain", "compose"] {
            std::fs::create_dir_all(dir.path().join(t)).unwrap();
            std::fs::write(dir.path().join(t).join("result.json"), t).unwrap();
        }
        let mut recorder = ManifestRecorder::open(dir.path(), "job", &HashSet::new());
        recorder.trial_finished("plain").unwrap();
        recorder.trial_finished("compose").unwrap();
        // The teardown saves the sidecar's log after the trial's line.
        std::fs::create_dir_all(dir.path().join("compose/sidecars")).unwrap();
        std::fs::write(dir.path().join("compose/sidecars/db.log"), "bye").unwrap();
        recorder.teardowns_done().unwrap();
        recorder.teardowns_done().unwrap();
        let m = read(dir.path());
        assert!(m.trials["plain"].sidecars.is_none());
        let sidecars = m.trials["compose"].sidecars.as_ref().unwrap();
        assert_eq!(sidecars.files.keys().collect::<Vec<_>>(), ["db.log"]);
        let text = std::fs::read_to_string(dir.path().join(RECORD_MANIFEST)).unwrap();
        assert_eq!(text.matches("\"line\":\"sidecars\"").count(), 1, "{text}");
        std::fs::write(dir.path().join("compose/sidecars/db.log"), "edited").unwrap();
        let changes = m
            .trial_changes("compose", &dir.path().join("compose"))
            .unwrap()
            .unwrap();
        assert_eq!(changes, vec![FileChange::Changed("sidecars/db.log".into())]);
    }
}
