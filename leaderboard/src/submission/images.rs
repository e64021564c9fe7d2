//! `same_task_image`: every trial of a task ran on the same image, across all jobs of the
//! submission. runner's `lock.json` records per trial the image (`task.image.id`, or the older
//! `task.image_id`); trials of one task on different ids measured different environments (a
//! re-pushed tag, a rebuild with `--force-build`, a build on another machine). Harbor's locks
//! record no image, so their trials are not compared.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::Rule;
use super::report::Violation;

/// The image one trial ran on, as its job's lock records it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialImage {
    /// The job dir, as given.
    pub job: String,
    /// The trial dir's name.
    pub trial: String,
    /// The task's name.
    pub task: String,
    /// The image id.
    pub id: String,
    /// What the trial started from (tag or `docker_image`) and how it came (`pulled`, ...).
    pub described: String,
}

/// The images of the trials of one job that are present as trial dirs.
pub fn from_lock(lock: &Value, job: &str, trial_dirs: &[std::path::PathBuf]) -> Vec<TrialImage> {
    let present = |name: &str| {
        trial_dirs
            .iter()
            .any(|d| d.file_name() == Some(name.as_ref()))
    };
    let Some(trials) = lock.get("trials").and_then(Value::as_array) else {
        return Vec::new();
    };
    trials
        .iter()
        .filter_map(|trial| {
            let name = trial.get("trial_name").and_then(Value::as_str)?;
            if !present(name) {
                return None;
            }
            let task = trial.get("task")?;
            let image = task.get("image");
            let text = |v: Option<&Value>, key: &str| {
                v.and_then(|v| v.get(key))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let id = text(image, "id").or_else(|| text(Some(task), "image_id"))?;
            let reference = text(image, "reference")
                .or_else(|| text(Some(task), "image_tag"))
                .unwrap_or_else(|| "?".into());
            let origin = text(image, "origin").unwrap_or_else(|| "unknown origin".into());
            Some(TrialImage {
                job: job.to_owned(),
                trial: name.to_owned(),
                task: text(Some(task), "name")?,
                id,
                described: format!("{reference}, {origin}"),
            })
        })
        .collect()
}

/// One image of a task: its description and trial count per job.
type ImageUse<'a> = (&'a str, BTreeMap<&'a str, usize>);

/// One violation per task whose trials ran on more than one image id.
pub fn check(images: &[TrialImage]) -> Vec<Violation> {
    // task → id → use
    let mut by_task: BTreeMap<&str, BTreeMap<&str, ImageUse>> = BTreeMap::new();
    for image in images {
        let entry = by_task
            .entry(&image.task)
            .or_default()
            .entry(&image.id)
            .or_insert((&image.described, BTreeMap::new()));
        *entry.1.entry(&image.job).or_default() += 1;
    }
    by_task
        .into_iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(task, ids)| {
            let parts: Vec<String> = ids
                .iter()
                .map(|(id, (described, jobs))| {
                    let jobs: Vec<String> = jobs
                        .iter()
                        .map(|(job, n)| format!("{n} in {}", short(job)))
                        .collect();
                    format!("{id} ({described}; trials: {})", jobs.join(", "))
                })
                .collect();
            let first_job = images.iter().find(|i| i.task == task).map(|i| &i.job);
            Violation::new(
                Rule::SameTaskImage,
                first_job.map(|j| format!("{j}/lock.json")),
                format!(
                    "task {task} ran on {} different images: {}; run every trial on one image (the task's \
                     pinned docker_image, without --force-build)",
                    ids.len(),
                    parts.join("; ")
                ),
            )
        })
        .collect()
}

fn short(job: &str) -> &str {
    Path::new(job)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lock(ids: &[(&str, &str)]) -> Value {
        json!({"trials": ids.iter().map(|(trial, id)| json!({
            "trial_name": trial,
            "task": {"name": "org/t", "image": {"id": id, "reference": "127.0.0.1:5000/t:1", "origin": "pulled"}}
        })).collect::<Vec<_>>()})
    }

    #[test]
    fn only_trials_present_as_dirs_count_and_one_image_passes() {
        let dirs = vec!["/j/a".into(), "/j/b".into()];
        let images = from_lock(
            &lock(&[("a", "sha256:1"), ("b", "sha256:1"), ("gone", "sha256:2")]),
            "/j",
            &dirs,
        );
        assert_eq!(images.len(), 2);
        assert!(check(&images).is_empty());
    }

    #[test]
    fn two_images_of_one_task_across_jobs_are_reported_with_their_trials() {
        let mut images = from_lock(
            &lock(&[("a", "sha256:1")]),
            "/x/job1",
            &["/x/job1/a".into()],
        );
        images.extend(from_lock(
            &lock(&[("b", "sha256:2"), ("c", "sha256:2")]),
            "/x/job2",
            &["/x/job2/b".into(), "/x/job2/c".into()],
        ));
        let violations = check(&images);
        assert_eq!(violations.len(), 1);
        let message = &violations[0].message;
        assert!(
            message.contains("task org/t ran on 2 different images")
                && message.contains("sha256:1 (127.0.0.1:5000/t:1, pulled; trials: 1 in job1)")
                && message.contains("sha256:2 (127.0.0.1:5000/t:1, pulled; trials: 2 in job2)"),
            "{message}"
        );
        assert_eq!(violations[0].file.as_deref(), Some("/x/job1/lock.json"));
    }

    #[test]
    fn harbor_locks_and_older_runner_locks_are_read() {
        let harbor = json!({"trials": [{"task": {"name": "org/t", "type": "package"}}]});
        assert!(from_lock(&harbor, "/j", &["/j/a".into()]).is_empty());
        let older = json!({"trials": [{"trial_name": "a", "task": {"name": "org/t", "image_id": "sha256:9", "image_tag": "runner-task-t:0"}}]});
        let images = from_lock(&older, "/j", &["/j/a".into()]);
        assert_eq!(images[0].id, "sha256:9");
        assert_eq!(images[0].described, "runner-task-t:0, unknown origin");
    }
}
