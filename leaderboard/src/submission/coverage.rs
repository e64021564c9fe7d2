//! `min_trials_per_task` and `correct_task_versions`: task coverage across all jobs, and task
//! content digests against `--dataset`.

use std::collections::{BTreeMap, HashMap};

use super::Rule;
use super::report::Violation;
use super::trial::TrialFacts;

/// The dataset's tasks: name → `sha256:<hex>` content digest, from a dataset directory or a
/// published manifest.
#[derive(Debug, Clone)]
pub struct DatasetTasks {
    /// Full task names with their digests.
    pub digests: BTreeMap<String, String>,
}

impl DatasetTasks {
    /// Reads names and digests from a loaded dataset.
    pub fn from_dataset(dataset: &tasks::Dataset) -> DatasetTasks {
        DatasetTasks {
            digests: dataset
                .tasks
                .iter()
                .map(|t| (t.name.clone(), t.digest.clone()))
                .collect(),
        }
    }

    /// The tasks of `path`: a manifest file (Harbor's `dataset.toml` with every task's digest)
    /// or a dataset (or task) directory, whose digests are computed. A dataset given by name
    /// resolves to one of these first and comes in here.
    pub fn from_path(path: &std::path::Path) -> Result<DatasetTasks, super::SubmissionError> {
        if super::manifest::is_manifest(path) {
            let manifest = super::manifest::Manifest::read(path)?;
            return Ok(DatasetTasks {
                digests: manifest.digests,
            });
        }
        // `read`, not `load`: a submission may cover tasks Harbor runs and this runner cannot yet.
        Ok(DatasetTasks::from_dataset(&tasks::Dataset::read(path)?))
    }

    /// The dataset task a trial's task name refers to: the same name, else the same short
    /// name (`org/name` vs `name`) when that is unambiguous.
    pub fn resolve<'a>(&'a self, name: &str) -> Option<&'a str> {
        if let Some((key, _)) = self.digests.get_key_value(name) {
            return Some(key);
        }
        let short = short_name(name);
        let mut found = self.digests.keys().filter(|k| short_name(k) == short);
        let first = found.next()?;
        found.next().is_none().then_some(first.as_str())
    }
}

fn short_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Harbor's ref normalisation: trimmed, lowercase, without `sha256:`.
pub(crate) fn normalise(reference: &str) -> String {
    let r = reference.trim().to_ascii_lowercase();
    r.strip_prefix("sha256:").map(str::to_owned).unwrap_or(r)
}

/// Trials per task: every dataset task (with `--dataset`), else every task seen. Trials count
/// whatever their outcome; a trial for a task outside the dataset counts for nothing.
pub fn trials_per_task(
    trials: &[TrialFacts],
    dataset: Option<&DatasetTasks>,
) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    if let Some(ds) = dataset {
        counts.extend(ds.digests.keys().map(|k| (k.clone(), 0)));
    }
    for trial in trials {
        let Some(task) = &trial.task else { continue };
        let key = match dataset {
            Some(ds) => match ds.resolve(task) {
                Some(name) => name.to_owned(),
                None => continue,
            },
            None => task.clone(),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}

/// Violations of `min_trials_per_task`.
pub fn check_min_trials(counts: &BTreeMap<String, usize>, min_trials: usize) -> Vec<Violation> {
    counts
        .iter()
        .filter(|(_, n)| **n < min_trials)
        .map(|(task, n)| {
            Violation::new(
                Rule::MinTrialsPerTask,
                None,
                format!(
                    "task {task} has {n} trial(s); at least {min_trials} are needed (run with -k {min_trials}, or \
                     add a job that completes it)"
                ),
            )
        })
        .collect()
}

/// Violations of `correct_task_versions`: one per trial whose ref is missing or differs, and one
/// per task name outside the dataset.
pub fn check_versions(trials: &[TrialFacts], dataset: &DatasetTasks) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut unknown: HashMap<&str, Vec<&str>> = HashMap::new();
    for trial in trials {
        let Some(task) = &trial.task else { continue };
        let Some(name) = dataset.resolve(task) else {
            unknown.entry(task).or_default().push(&trial.display);
            continue;
        };
        let expected = &dataset.digests[name];
        let file = Some(format!("{}/config.json", trial.display));
        match &trial.task_ref {
            None => violations.push(Violation::new(
                Rule::CorrectTaskVersions,
                file,
                format!(
                    "no task ref recorded for task {name} (config.task.ref); expected {expected}; run the task \
                     from the dataset package so its digest is recorded"
                ),
            )),
            Some(r) if normalise(r) != normalise(expected) => violations.push(Violation::new(
                Rule::CorrectTaskVersions,
                file,
                format!(
                    "task {name} ran at {r} but the dataset's content digest is {expected}: the task content \
                     differs; rerun with the unmodified dataset"
                ),
            )),
            Some(_) => {}
        }
    }
    let mut unknown: Vec<_> = unknown.into_iter().collect();
    unknown.sort();
    for (task, dirs) in unknown {
        violations.push(Violation::new(
            Rule::CorrectTaskVersions,
            dirs.first().map(|d| format!("{d}/config.json")),
            format!(
                "{} trial(s) ran task {task}, which is not in the dataset",
                dirs.len()
            ),
        ));
    }
    violations
}
