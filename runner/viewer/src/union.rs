//! Several job dirs read as one job: the shards of a `runner run --shard I/N` split, or a job
//! and a re-run of some of its trials, as Harbor's multi-job submission reads them. Each
//! trial counts once, by name.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::ViewerError;
use crate::load::{Job, Trial, load_job};

/// Reads `dirs` as one job: every trial once (a finished copy over an unfinished one, else
/// the copy of the first dir given), the first dir's config and result. Two finished copies
/// of a trial with different rewards or exceptions are noted in the job's problems.
pub fn load_jobs(dirs: &[PathBuf]) -> Result<Job, ViewerError> {
    let (first, rest) = dirs.split_first().ok_or(ViewerError::NoJobs)?;
    let mut job = load_job(first)?;
    if rest.is_empty() {
        return Ok(job);
    }
    let mut names = vec![job.name.clone()];
    let mut trials: BTreeMap<String, Trial> = std::mem::take(&mut job.trials)
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    for dir in rest {
        let other = load_job(dir)?;
        if !names.contains(&other.name) {
            names.push(other.name.clone());
        }
        job.problems.extend(
            other
                .problems
                .iter()
                .map(|p| format!("{}: {p}", dir.display())),
        );
        for trial in other.trials {
            match trials.get(&trial.name) {
                None => {
                    trials.insert(trial.name.clone(), trial);
                }
                Some(kept) if !kept.finished && trial.finished => {
                    trials.insert(trial.name.clone(), trial);
                }
                Some(kept) if kept.finished && trial.finished && differs(kept, &trial) => {
                    job.problems.push(format!(
                        "trial {} is in {} and in {} with different results; the first is counted",
                        trial.name,
                        kept.dir.display(),
                        trial.dir.display()
                    ));
                }
                Some(_) => {}
            }
        }
    }
    job.trials = trials.into_values().collect();
    job.name = names.join(" + ");
    // The first part's result.json describes only that part.
    job.result = None;
    Ok(job)
}

fn differs(a: &Trial, b: &Trial) -> bool {
    a.rewards != b.rewards
        || a.exception.as_ref().map(|e| &e.kind) != b.exception.as_ref().map(|e| &e.kind)
}
