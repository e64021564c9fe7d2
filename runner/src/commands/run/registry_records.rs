//! What a job run by name (`-d`) records: config.json's `datasets[0]` in Harbor's shape (name,
//! version and registry instead of a path), each task's lock entry with its registry,
//! repository, commit and content digest (through [`tasks::Task::origin`]), and the check
//! that a resume runs the commits the job started with.

use std::path::Path;

use registry::{RegistrySource, ResolvedDataset};
use tasks::Dataset;
use tasks::records::{DatasetRef, JobConfig, JobLock, TaskOrigin};

use crate::exit::CliError;

/// The registry as lock.json and config.json name it.
fn registry_name(source: &RegistrySource) -> String {
    match source {
        RegistrySource::Url(url) => registry::git::redact(url),
        RegistrySource::Path(path) => std::path::absolute(path)
            .unwrap_or_else(|_| path.clone())
            .display()
            .to_string(),
    }
}

/// Tells each task of `dataset` (loaded from `resolved.dir`) where it came from.
pub fn set_origins(dataset: &mut Dataset, resolved: &ResolvedDataset) {
    let registry = registry_name(&resolved.registry);
    for task in &mut dataset.tasks {
        let dir_name = task
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(found) = resolved.task_by_dir_name(&dir_name) {
            task.origin = Some(TaskOrigin {
                registry: registry.clone(),
                git_url: found.git_url.clone(),
                git_commit_id: found.git_commit_id.clone(),
                path: found.path.clone(),
            });
        }
    }
}

/// `datasets[0]` as Harbor 0.26 writes a registry dataset; the selection already recorded
/// there is kept.
pub fn record_dataset(config: &mut JobConfig, resolved: &ResolvedDataset) {
    let Some(dataset) = config.datasets.first_mut() else {
        return;
    };
    let (url, path) = match &resolved.registry {
        RegistrySource::Url(_) => (Some(registry_name(&resolved.registry)), None),
        RegistrySource::Path(_) => (None, Some(registry_name(&resolved.registry))),
    };
    *dataset = DatasetRef {
        path: None,
        name: Some(resolved.name.clone()),
        version: Some(resolved.version.clone()),
        registry_url: url,
        registry_path: path,
        task_names: dataset.task_names.take(),
        exclude_task_names: dataset.exclude_task_names.take(),
        n_tasks: dataset.n_tasks,
        ..DatasetRef::default()
    };
}

/// Refuses to resume `job_dir` when the registry now pins a task of the job to another
/// commit (or another repository) than the one the job started with.
pub fn check_pins(job_dir: &Path, resolved: &ResolvedDataset) -> Result<(), CliError> {
    let lock_path = job_dir.join("lock.json");
    let Ok(bytes) =
        tasks::bounded::read_capped(&lock_path, tasks::bounded::MAX_RECORD_BYTES, "job record")
    else {
        return Ok(());
    };
    let Ok(lock) = serde_json::from_slice::<JobLock>(&bytes) else {
        return Ok(());
    };
    for trial in &lock.trials {
        let (Some(url), Some(commit), Some(path)) = (
            trial.task.git_url.as_deref(),
            trial.task.git_commit_id.as_deref(),
            trial.task.path.as_deref(),
        ) else {
            continue;
        };
        let now = resolved
            .tasks
            .iter()
            .find(|t| t.path == path && t.git_url.as_deref() == Some(url));
        let now_commit = now.and_then(|t| t.git_commit_id.as_deref());
        if now_commit != Some(commit) {
            return Err(CliError::bad_input(format!(
                "{}: task {} was fetched from {url} at {commit}, but the registry {} now pins {}; the job cannot continue on other tasks than it started with: start a new job, or resume with the registry as it was (--registry-path to a saved copy)",
                lock_path.display(),
                trial.task.name,
                registry_name(&resolved.registry),
                match now_commit {
                    Some(c) => format!("commit {c}"),
                    None => "no such task".to_owned(),
                }
            )));
        }
    }
    Ok(())
}
