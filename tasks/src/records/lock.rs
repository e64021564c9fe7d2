//! `<job>/lock.json`: the resolved inputs of a job (Harbor's `JobLock`, plus the exact image
//! every task ran on: reference, id, registry digests, how it was obtained, and the engine).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::multipliers::Multipliers;

use super::job_config::RetryConfig;
use super::trial_config::{AgentConfig, EnvironmentConfig, TrialConfig, VerifierConfig};

/// The tool that ran the job (Harbor writes `harbor`; we write `runner` and also fill `harbor`
/// with our identity so Harbor's reader finds the field).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunnerInfo {
    /// Version.
    pub version: String,
    /// Git commit of the runner build, if known.
    pub git_commit_hash: Option<String>,
    /// Harbor field.
    pub is_editable: bool,
}

/// A task as locked.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LockTask {
    /// Task name.
    pub name: String,
    /// The task package's `[task] version` (schema 1.4), `null` when it sets none: Harbor
    /// 0.26's `TaskLock.version`.
    #[serde(default)]
    pub version: Option<String>,
    /// Always `local`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `sha256:<content digest>`.
    pub digest: String,
    /// Dataset name.
    pub source: Option<String>,
    /// Task path.
    pub path: Option<String>,
    /// Runner-only: the image the trial ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Runner-only: the image tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tag: Option<String>,
    /// Runner-only: the image in full (reference, digests, origin, engine), so a run can be
    /// reproduced on the same image and a submission checked for trials on different images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<LockImage>,
}

/// How a task's image came to be available to the job.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LockImageOrigin {
    /// Built by this job from `environment/Dockerfile`.
    Built,
    /// Pulled from a registry by this job.
    Pulled,
    /// Already present in the engine: an earlier build of the same content, or a prebuilt
    /// image pulled or imported before the job.
    Reused,
}

/// Runner-only: the image one task's trials ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockImage {
    /// The reference trials started from: the task's `docker_image`, or the content-addressed
    /// tag runner built.
    pub reference: String,
    /// The engine's image id (`sha256:…`, the digest of the image config): the same image has
    /// the same id wherever it was pulled; a local build has an id of its own.
    pub id: String,
    /// The engine's `RepoDigests` (`repository@sha256:…`, the manifest digests registries
    /// serve); empty for an image that was only built locally.
    #[serde(default)]
    pub repo_digests: Vec<String>,
    /// Whether this job pulled, built or reused it.
    pub origin: LockImageOrigin,
    /// The container engine and its version (`docker 20.10.24`), when the engine told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
}

/// One trial as locked. A job has an entry per trial and every trial of a task shares the
/// same task, agent, environment and verifier, so those are held once (`Arc`) and the entries
/// of a large job cost its names, not kilobytes each; the JSON is the same.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockTrial {
    /// The trial's name (runner-only; Harbor matches trials unordered).
    pub trial_name: String,
    /// The task.
    pub task: Arc<LockTask>,
    /// Harbor's five timeout multipliers, under their Harbor names.
    #[serde(flatten)]
    pub multipliers: Multipliers,
    /// The agent.
    pub agent: Arc<AgentConfig>,
    /// The environment.
    pub environment: Arc<EnvironmentConfig>,
    /// The verifier.
    pub verifier: Arc<VerifierConfig>,
}

impl LockTrial {
    /// Locks a trial's config: its multipliers, agent, environment and verifier, and `task`.
    /// (A job locks one trial per task this way and the others as clones of it renamed, so
    /// they share its parts.)
    pub fn new(config: &TrialConfig, task: LockTask) -> LockTrial {
        LockTrial {
            trial_name: config.trial_name.clone(),
            task: Arc::new(task),
            multipliers: config.multipliers,
            agent: Arc::new(config.agent.clone()),
            environment: Arc::new(config.environment.clone()),
            verifier: Arc::new(config.verifier.clone()),
        }
    }
}

/// `<job>/lock.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobLock {
    /// Lock schema version.
    pub schema_version: u32,
    /// When written.
    pub created_at: DateTime<Utc>,
    /// Harbor's tool field, filled with the runner's identity.
    pub harbor: RunnerInfo,
    /// The runner that wrote the job.
    pub runner: RunnerInfo,
    /// argv with `--agent-env` values redacted.
    pub invocation: Vec<String>,
    /// Runner-only: the working directory `invocation` ran in, so `runner jobs resume` can
    /// resolve its relative paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Concurrency.
    pub n_concurrent_trials: u32,
    /// Retry settings.
    pub retry: RetryConfig,
    /// Trials.
    pub trials: Vec<LockTrial>,
    /// Runner-only: the dataset digest.
    pub dataset_digest: Option<String>,
    /// Runner-only: image ids by task name.
    pub images: BTreeMap<String, String>,
    /// Runner-only, for a pool of engines (`--docker-host`): each task's image id on each
    /// engine that ran its trials (task name → engine → id). A build makes an image of its
    /// own on every engine; `images` holds the first engine's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub engine_images: BTreeMap<String, BTreeMap<String, String>>,
    /// Runner-only: credentials were allowed into containers (not publishable).
    pub allow_container_secrets: bool,
}

impl JobLock {
    /// Records the image `task`'s trials run on: in [`JobLock::images`] and in every trial of
    /// the task (`image_id`, `image_tag` and the full [`LockImage`]).
    pub fn record_image(&mut self, task: &str, image: &LockImage) {
        self.images.insert(task.to_owned(), image.id.clone());
        // Trials that shared a task entry share its imaged copy: one per distinct entry, found
        // by address (the old entry is kept in the map, so its address stays its own).
        let mut imaged: std::collections::HashMap<*const LockTask, (Arc<LockTask>, Arc<LockTask>)> =
            Default::default();
        for trial in self.trials.iter_mut().filter(|t| t.task.name == task) {
            let (_, new) = imaged.entry(Arc::as_ptr(&trial.task)).or_insert_with(|| {
                let mut entry = LockTask::clone(&trial.task);
                entry.image_id = Some(image.id.clone());
                entry.image_tag = Some(image.reference.clone());
                entry.image = Some(image.clone());
                (trial.task.clone(), Arc::new(entry))
            });
            let new = new.clone();
            trial.task = new;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock_with(tasks: &[&str]) -> JobLock {
        let trial = |name: &str| LockTrial {
            trial_name: format!("{name}__x"),
            task: Arc::new(LockTask {
                name: name.into(),
                ..LockTask::default()
            }),
            multipliers: Multipliers::default(),
            agent: Default::default(),
            environment: Default::default(),
            verifier: Default::default(),
        };
        JobLock {
            engine_images: Default::default(),
            schema_version: 1,
            created_at: Utc::now(),
            harbor: RunnerInfo::default(),
            runner: RunnerInfo::default(),
            invocation: Vec::new(),
            working_dir: None,
            n_concurrent_trials: 1,
            retry: RetryConfig::default(),
            trials: tasks.iter().map(|t| trial(t)).collect(),
            dataset_digest: None,
            images: BTreeMap::new(),
            allow_container_secrets: false,
        }
    }

    #[test]
    fn an_image_is_recorded_for_every_trial_of_its_task_only() {
        let mut lock = lock_with(&["a", "b", "a"]);
        let image = LockImage {
            reference: "127.0.0.1:5000/a:1".into(),
            id: "sha256:aa".into(),
            repo_digests: vec!["127.0.0.1:5000/a@sha256:bb".into()],
            origin: LockImageOrigin::Pulled,
            engine_version: Some("docker 20.10.24".into()),
        };
        lock.record_image("a", &image);
        assert_eq!(lock.images["a"], "sha256:aa");
        let of = |i: usize| lock.trials[i].task.image.clone();
        assert_eq!(of(0), Some(image.clone()));
        assert_eq!(of(2), Some(image));
        assert_eq!(of(1), None);
        let json = serde_json::to_value(&lock).unwrap();
        let recorded = &json["trials"][0]["task"]["image"];
        assert_eq!(recorded["origin"], "pulled");
        assert_eq!(recorded["repo_digests"][0], "127.0.0.1:5000/a@sha256:bb");
        assert_eq!(json["trials"][1]["task"].get("image"), None);
    }

    #[test]
    fn a_lock_without_image_details_still_reads() {
        let task: LockTask = serde_json::from_str(
            r#"{"name":"a","type":"local","digest":"sha256:0","source":null,"path":null,"image_id":"sha256:1"}"#,
        )
        .unwrap();
        assert_eq!(task.image, None);
        assert_eq!(task.image_id.as_deref(), Some("sha256:1"));
    }
}
