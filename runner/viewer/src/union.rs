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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn trial(job: &Path, name: &str, reward: Option<f64>) {
        let dir = job.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            format!(r#"{{"trial_name": "{name}", "task": {{"name": "t"}}}}"#),
        )
        .unwrap();
        if let Some(r) = reward {
            std::fs::write(
                dir.join("result.json"),
                format!(
                    r#"{{"trial_name": "{name}", "task_name": "t", "verifier_result": {{"rewards": {{"reward": {r}}}}}}}"#
                ),
            )
            .unwrap();
        }
    }

    #[test]
    fn each_trial_counts_once_finished_copies_first_and_differing_results_are_noted() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        for (dir, name) in [(&a, "a"), (&b, "b")] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(
                dir.join("config.json"),
                format!(r#"{{"job_name": "{name}"}}"#),
            )
            .unwrap();
        }
        trial(&a, "t__1", Some(1.0));
        trial(&a, "t__2", None);
        trial(&b, "t__2", Some(0.0));
        trial(&b, "t__3", Some(1.0));
        trial(&b, "t__1", Some(0.0));
        let job = load_jobs(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(job.name, "a + b");
        let got: Vec<(&str, bool, Option<f64>)> = job
            .trials
            .iter()
            .map(|t| (t.name.as_str(), t.finished, t.reward()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("t__1", true, Some(1.0)),
                ("t__2", true, Some(0.0)),
                ("t__3", true, Some(1.0))
            ]
        );
        assert_eq!(job.problems.len(), 1, "{:?}", job.problems);
        assert!(
            job.problems[0].contains("trial t__1 is in"),
            "{:?}",
            job.problems
        );
        // The same dir twice is the dir once.
        let twice = load_jobs(&[a.clone(), a.clone()]).unwrap();
        assert_eq!(twice.trials.len(), 2);
        assert!(twice.problems.is_empty());
        assert!(matches!(load_jobs(&[]), Err(ViewerError::NoJobs)));
    }
}
