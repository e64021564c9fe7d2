//! One job dir given to `runner merge`, read: its config, lock and result, and its trials.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tasks::TrialOutcome;
use tasks::records::{JobConfig, JobLock, JobResult, TrialConfig, TrialResult};

use super::MergeError;
use crate::job::resume::{ResumeError, read_record};

/// A job dir being merged.
#[derive(Debug)]
pub struct Part {
    /// The dir as given.
    pub dir: PathBuf,
    /// Its config.json.
    pub config: JobConfig,
    /// Its lock.json.
    pub lock: JobLock,
    /// Its result.json, when it has one.
    pub result: Option<JobResult>,
    /// Its trial dirs, by name.
    pub trials: BTreeMap<String, TrialCopy>,
}

/// One trial dir of a part.
#[derive(Debug)]
pub struct TrialCopy {
    /// The trial dir.
    pub dir: PathBuf,
    /// Its result.json (`None`: the trial did not finish there).
    pub result: Option<TrialResult>,
    /// Its config.json (or the config its result holds).
    pub config: Option<TrialConfig>,
}

impl TrialCopy {
    /// How much this copy is worth: a result that counts (scored or an agent error, 2) over
    /// an infrastructure error (missing data, 1) over no result at all (0).
    pub fn rank(&self) -> u8 {
        match &self.result {
            None => 0,
            Some(r) if r.outcome() == TrialOutcome::InfraError => 1,
            Some(_) => 2,
        }
    }
}

impl Part {
    /// Reads the job dir `dir`: config.json and lock.json are required (they define the plan
    /// the part belongs to), result.json is optional (a job killed before writing one).
    pub fn read(dir: &Path) -> Result<Part, MergeError> {
        let not_a_job = |why: String| MergeError::NotAJob {
            dir: dir.to_owned(),
            why,
        };
        if !dir.is_dir() {
            return Err(not_a_job("not a directory".into()));
        }
        let config: JobConfig = read(&dir.join("config.json"))?.ok_or_else(|| {
            not_a_job("it has no config.json, so it is not a job dir runner wrote".into())
        })?;
        let lock: JobLock = read(&dir.join("lock.json"))?.ok_or_else(|| {
            not_a_job(
                "it has no lock.json, so the plan it belongs to (tasks and their digests) is unknown"
                    .into(),
            )
        })?;
        let result: Option<JobResult> = read(&dir.join("result.json"))?;
        let entries = std::fs::read_dir(dir).map_err(|source| MergeError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let mut trials = BTreeMap::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            // A record that does not parse counts as missing, as on a resume.
            let result = read::<TrialResult>(&path.join("result.json"))
                .ok()
                .flatten();
            let config = read::<TrialConfig>(&path.join("config.json"))
                .ok()
                .flatten()
                .or_else(|| result.as_ref().map(|r| r.config.clone()));
            trials.insert(
                name,
                TrialCopy {
                    dir: path,
                    result,
                    config,
                },
            );
        }
        Ok(Part {
            dir: dir.to_owned(),
            config,
            lock,
            result,
            trials,
        })
    }

    /// `shard I/N`, or `whole job`.
    pub fn label(&self) -> String {
        match (self.config.shard, self.config.n_shards) {
            (Some(i), Some(n)) => format!("shard {i}/{n}"),
            _ => "whole job".into(),
        }
    }
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, MergeError> {
    read_record(path).map_err(|e| match e {
        ResumeError::Io { path, source } => MergeError::Io { path, source },
        ResumeError::NotAJob { dir, why } => MergeError::NotAJob { dir, why },
        other => MergeError::NotAJob {
            dir: path.parent().unwrap_or(path).to_owned(),
            why: other.to_string(),
        },
    })
}
