//! The job's `record_manifest.json` as the job runs: each trial's files hashed as the trial
//! ends (the job recorder calls [`ManifestRecorder::trial_finished`] on `TrialFinished`, after
//! its result.json is durable and its environment gone, so nothing writes there any more),
//! config.json and lock.json each time the recorder writes the lock, and the signature
//! (`--signing-key`) over the final manifest when the job ends or a merge writes it.
//!
//! Written when result.json is (at most every 0.5 s, and at the end): the manifest is
//! O(trials) like result.json, so writing it on every trial's end would make a job O(trials²).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tasks::atomic::write_atomic;
use tasks::records::record_manifest::{FileChange, compare, digest_tree};
use tasks::records::record_signature::{RECORD_SIGNATURE, SigningKey, sign};
use tasks::records::{RECORD_MANIFEST, RecordManifest};

/// Keeps a job's record manifest current.
pub struct ManifestRecorder {
    dir: PathBuf,
    manifest: RecordManifest,
    dirty: bool,
}

impl ManifestRecorder {
    /// The manifest of the job in `dir`: on a resume, the entries of the trials found complete
    /// (`done`) are kept, and a complete trial without one (its job ended between its result
    /// and the next manifest write) is hashed now; other entries are dropped (those trials
    /// run again).
    pub fn open(dir: &Path, job_id: &str, done: &HashSet<String>) -> ManifestRecorder {
        let earlier: Option<RecordManifest> =
            tasks::records::read::read_typed(&dir.join(RECORD_MANIFEST))
                .ok()
                .flatten();
        let mut recorder = ManifestRecorder {
            dir: dir.to_owned(),
            manifest: RecordManifest::new(job_id),
            dirty: !done.is_empty(),
        };
        // Without an earlier manifest (a job of a runner that wrote none, or a merge's new
        // dir) nothing is hashed now: files found later are not vouched for as the trial's end.
        let Some(earlier) = earlier else {
            return recorder;
        };
        recorder.manifest.trials = earlier
            .trials
            .into_iter()
            .filter(|(name, _)| done.contains(name))
            .collect();
        for name in done {
            if !recorder.manifest.trials.contains_key(name) {
                // Unreadable now means unreadable at validation too: it shows there.
                let _ = recorder.trial_finished(name);
            }
        }
        recorder
    }

    /// Hashes the trial `name`'s dir (it just ended).
    pub fn trial_finished(&mut self, name: &str) -> std::io::Result<()> {
        self.dirty = true;
        self.manifest.record_trial(name, &self.dir.join(name))
    }

    /// Hashes config.json and lock.json (just written).
    pub fn job_files_written(&mut self) -> std::io::Result<()> {
        self.dirty = true;
        self.manifest.record_job_files(&self.dir)
    }

    /// Sets the trials' entries wholesale (a merge: each from the part it was taken from).
    pub fn set_trials(&mut self, trials: tasks::records::record_manifest::TrialEntries) {
        self.manifest.trials = trials;
        self.dirty = true;
    }

    /// Writes the manifest if it changed since it was last written.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        write_atomic(&self.dir.join(RECORD_MANIFEST), &self.manifest.to_bytes())
    }
}

/// Signs the job in `dir`'s manifest with `key` (`record_manifest.sig`). A job without a
/// manifest is an error: there would be nothing the signature vouches for.
pub fn sign_job(dir: &Path, key: &SigningKey) -> std::io::Result<()> {
    let bytes = std::fs::read(dir.join(RECORD_MANIFEST))?;
    let signature = sign(key, &bytes);
    tasks::atomic::write_json_atomic(&dir.join(RECORD_SIGNATURE), &signature)
}

/// How the trial dir `trial_dir` differs from its entry in `manifest`; `None` when the
/// manifest has no entry for `name`.
pub fn trial_changes(
    manifest: &RecordManifest,
    name: &str,
    trial_dir: &Path,
) -> Option<std::io::Result<Vec<FileChange>>> {
    let entry = manifest.trials.get(name)?;
    Some(digest_tree(trial_dir).map(|actual| compare(&entry.files, &actual)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_keeps_complete_trials_hashes_unrecorded_ones_and_drops_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for t in ["a", "b", "c"] {
            std::fs::create_dir_all(dir.path().join(t)).unwrap();
            std::fs::write(dir.path().join(t).join("result.json"), t).unwrap();
        }
        let none: HashSet<String> = ["a", "b", "c"].map(str::to_owned).into();
        // No earlier manifest: nothing found is vouched for.
        let mut fresh = ManifestRecorder::open(dir.path(), "job", &none);
        fresh.flush().unwrap();
        let m: RecordManifest =
            serde_json::from_slice(&std::fs::read(dir.path().join(RECORD_MANIFEST)).unwrap())
                .unwrap();
        assert!(m.trials.is_empty());
        let mut first = ManifestRecorder::open(dir.path(), "job", &HashSet::new());
        first.trial_finished("a").unwrap();
        first.trial_finished("c").unwrap();
        first.flush().unwrap();
        // "a" changed after it was recorded: a resume keeps the recorded hash, never the new.
        std::fs::write(dir.path().join("a/result.json"), "forged").unwrap();
        let done: HashSet<String> = ["a", "b"].map(str::to_owned).into();
        let mut resumed = ManifestRecorder::open(dir.path(), "job", &done);
        resumed.flush().unwrap();
        let m: RecordManifest =
            serde_json::from_slice(&std::fs::read(dir.path().join(RECORD_MANIFEST)).unwrap())
                .unwrap();
        assert_eq!(m.trials.keys().collect::<Vec<_>>(), ["a", "b"]);
        let changes = trial_changes(&m, "a", &dir.path().join("a"))
            .unwrap()
            .unwrap();
        assert_eq!(changes, vec![FileChange::Changed("result.json".into())]);
        assert!(trial_changes(&m, "c", &dir.path().join("c")).is_none());
    }
}
