//! Two job dirs compared task by task on their main reward (see `stats::compare`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use stats::{Comparison, Resampling};

use crate::ViewerError;
use crate::load::{self, Job};
use crate::summary::{Title, title_of};

/// The `schema` of [`JobComparison`]'s JSON form.
pub const COMPARISON_SCHEMA: &str = "runner.compare/v1";

/// Which job a side of the comparison is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// The job dir as given.
    pub job_dir: String,
    /// `job_name`, else the dir's name.
    pub job_name: String,
    /// Dataset, agent, model.
    pub title: Title,
    /// Finished trials.
    pub n_trials: usize,
}

/// Job B against job A.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobComparison {
    /// Always [`COMPARISON_SCHEMA`].
    pub schema: &'static str,
    /// The baseline.
    pub a: Side,
    /// The candidate.
    pub b: Side,
    /// The paired statistics; positive differences mean B did better.
    #[serde(flatten)]
    pub stats: Comparison,
}

fn by_task(job: &Job) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut tasks: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for trial in job.trials.iter().filter(|t| t.finished) {
        tasks
            .entry(trial.task.clone())
            .or_default()
            .push(trial.reward());
    }
    tasks
}

fn side(job: &Job) -> Side {
    Side {
        job_dir: job.dir.display().to_string(),
        job_name: job.name.clone(),
        title: title_of(job),
        n_trials: job.trials.iter().filter(|t| t.finished).count(),
    }
}

/// Compares job dir `b` with job dir `a` (unfinished trials left out).
pub fn compare_jobs(a: &Path, b: &Path) -> Result<JobComparison, ViewerError> {
    let (a, b) = (load::load_job(a)?, load::load_job(b)?);
    Ok(compare_loaded(&a, &b, &Resampling::default()))
}

/// Compares the job dirs `b`, read as one job, with the job dirs `a`, read as one (see
/// [`crate::load_jobs`]).
pub fn compare_job_sets(
    a: &[std::path::PathBuf],
    b: &[std::path::PathBuf],
) -> Result<JobComparison, ViewerError> {
    let (ja, jb) = (crate::union::load_jobs(a)?, crate::union::load_jobs(b)?);
    let mut comparison = compare_loaded(&ja, &jb, &Resampling::default());
    for (side, dirs) in [(&mut comparison.a, a), (&mut comparison.b, b)] {
        if dirs.len() > 1 {
            side.job_dir = dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" + ");
        }
    }
    Ok(comparison)
}

fn short_name(task: &str) -> &str {
    task.rsplit('/').next().unwrap_or(task)
}

/// Renames B's tasks that A knows under another prefix: Harbor 0.13 records `org/name` where
/// older Harbor and local datasets record `name`. A task is renamed only when its short name
/// picks exactly one unpaired task on each side.
fn align(
    a: &BTreeMap<String, Vec<Option<f64>>>,
    mut b: BTreeMap<String, Vec<Option<f64>>>,
) -> BTreeMap<String, Vec<Option<f64>>> {
    let unpaired_a: Vec<&String> = a.keys().filter(|k| !b.contains_key(*k)).collect();
    let unpaired_b: Vec<String> = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    for task in unpaired_b {
        let short = short_name(&task);
        let in_a: Vec<&&String> = unpaired_a
            .iter()
            .filter(|k| short_name(k) == short)
            .collect();
        let in_b = b.keys().filter(|k| short_name(k) == short).count();
        if let ([target], 1) = (in_a.as_slice(), in_b)
            && let Some(trials) = b.remove(&task)
        {
            b.insert((**target).clone(), trials);
        }
    }
    b
}

/// Compares two loaded jobs with intervals under `resampling`.
pub fn compare_loaded(a: &Job, b: &Job, resampling: &Resampling) -> JobComparison {
    let tasks_a = by_task(a);
    let tasks_b = align(&tasks_a, by_task(b));
    JobComparison {
        schema: COMPARISON_SCHEMA,
        a: side(a),
        b: side(b),
        stats: stats::compare(&tasks_a, &tasks_b, resampling),
    }
}
