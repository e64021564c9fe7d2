//! Earlier attempts of a trial, kept under `<trial>/attempts/<n>/`.
//!
//! A trial dir is a direct child of the job dir holding `result.json`; that is how Harbor's
//! readers and `validate-submission` find trials, so attempts nested inside it are never
//! counted. Moving the current attempt aside takes three renames through a hidden staging dir
//! (`.<trial>.retiring`), each durable; [`recover`] finishes a move a crash interrupted, so
//! after `kill -9` at any moment the attempt is either still the trial dir or kept whole.

use std::io;
use std::path::{Path, PathBuf};

use tasks::atomic::{rename_durable, sync_dir};

/// The folder of earlier attempts inside a trial dir.
pub const ATTEMPTS_DIR: &str = "attempts";

const STAGING_SUFFIX: &str = ".retiring";

fn staging(job_dir: &Path, trial: &str) -> PathBuf {
    job_dir.join(format!(".{trial}{STAGING_SUFFIX}"))
}

/// How many earlier attempts `trial_dir` keeps (numbered entries of `attempts/`).
pub fn kept_attempts(trial_dir: &Path) -> u32 {
    highest(&trial_dir.join(ATTEMPTS_DIR))
}

fn highest(attempts: &Path) -> u32 {
    std::fs::read_dir(attempts)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Moves the trial dir `<job_dir>/<trial>` (whatever state its attempt ended in) to
/// `<job_dir>/<trial>/attempts/<n>/` and returns `n`; the trial dir then holds only
/// `attempts/`, ready for the next attempt.
pub fn retire(job_dir: &Path, trial: &str) -> io::Result<u32> {
    let stage = staging(job_dir, trial);
    if stage.exists() {
        recover_one(job_dir, trial)?;
    }
    let dir = job_dir.join(trial);
    std::fs::create_dir(&stage)?;
    let kept = dir.join(ATTEMPTS_DIR);
    let staged = stage.join(ATTEMPTS_DIR);
    if kept.is_dir() {
        rename_durable(&kept, &staged)?;
    } else {
        std::fs::create_dir(&staged)?;
        sync_dir(&stage)?;
    }
    finish_move(job_dir, trial)
}

/// The last two steps: the attempt into the staging dir's `attempts/<n>`, the staging dir
/// back to the trial's name. Returns `n` (0 when there was no attempt left to move).
fn finish_move(job_dir: &Path, trial: &str) -> io::Result<u32> {
    let stage = staging(job_dir, trial);
    let dir = job_dir.join(trial);
    let staged = stage.join(ATTEMPTS_DIR);
    let mut n = 0;
    if dir.exists() {
        n = highest(&staged) + 1;
        rename_durable(&dir, &staged.join(n.to_string()))?;
    }
    rename_durable(&stage, &dir)?;
    Ok(n)
}

fn recover_one(job_dir: &Path, trial: &str) -> io::Result<()> {
    let stage = staging(job_dir, trial);
    let dir = job_dir.join(trial);
    if !stage.join(ATTEMPTS_DIR).is_dir() {
        // Interrupted before the earlier attempts moved: nothing moved yet.
        if dir.exists() {
            let kept = dir.join(ATTEMPTS_DIR);
            if kept.is_dir() {
                rename_durable(&kept, &stage.join(ATTEMPTS_DIR))?;
            } else {
                std::fs::create_dir(stage.join(ATTEMPTS_DIR))?;
            }
        } else {
            std::fs::remove_dir_all(&stage)?;
            return sync_dir(job_dir);
        }
    }
    finish_move(job_dir, trial).map(|_| ())
}

/// Finishes every move a crash interrupted; returns the trials concerned.
pub fn recover(job_dir: &Path) -> io::Result<Vec<String>> {
    let mut recovered = Vec::new();
    for entry in std::fs::read_dir(job_dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(trial) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(STAGING_SUFFIX))
        else {
            continue;
        };
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            recover_one(job_dir, trial)?;
            recovered.push(trial.to_owned());
        }
    }
    Ok(recovered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn attempts_are_numbered_and_kept_whole() {
        let job = tempfile::tempdir().unwrap();
        let trial = job.path().join("t__abc");
        write(&trial.join("result.json"), "first");
        write(&trial.join("agent/log.txt"), "a1");
        assert_eq!(retire(job.path(), "t__abc").unwrap(), 1);
        assert!(!trial.join("result.json").exists());
        write(&trial.join("result.json"), "second");
        assert_eq!(retire(job.path(), "t__abc").unwrap(), 2);
        assert_eq!(read(&trial.join("attempts/1/result.json")), "first");
        assert_eq!(read(&trial.join("attempts/1/agent/log.txt")), "a1");
        assert_eq!(read(&trial.join("attempts/2/result.json")), "second");
        assert!(!trial.join("attempts/2/attempts").exists(), "no nesting");
        assert_eq!(kept_attempts(&trial), 2);
        let names: Vec<_> = std::fs::read_dir(job.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["t__abc"], "no staging dir left");
    }

    /// Every crash point of a move: the state left behind, then `recover`.
    #[test]
    fn recovery_finishes_a_move_interrupted_at_any_step() {
        for step in 0..4 {
            let job = tempfile::tempdir().unwrap();
            let trial = job.path().join("t");
            write(&trial.join("attempts/1/result.json"), "old");
            write(&trial.join("result.json"), "current");
            let stage = job.path().join(".t.retiring");
            if step >= 1 {
                std::fs::create_dir(&stage).unwrap();
            }
            if step >= 2 {
                std::fs::rename(trial.join("attempts"), stage.join("attempts")).unwrap();
            }
            if step >= 3 {
                std::fs::rename(&trial, stage.join("attempts/2")).unwrap();
            }
            recover(job.path()).unwrap();
            assert!(!stage.exists(), "step {step}");
            assert_eq!(
                read(&trial.join("attempts/1/result.json")),
                "old",
                "step {step}"
            );
            if step >= 1 {
                assert_eq!(
                    read(&trial.join("attempts/2/result.json")),
                    "current",
                    "step {step}"
                );
                assert!(!trial.join("result.json").exists(), "step {step}");
            } else {
                assert_eq!(read(&trial.join("result.json")), "current");
            }
        }
    }
}
