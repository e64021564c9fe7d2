//! `<job>/lock.json`: the resolved inputs of a job (Harbor 0.26's `JobLock`, schema 3, plus
//! the exact image every task ran on: reference, id, registry digests, how it was obtained, and
//! the engine). Locks the runner wrote before (schema 1, Harbor 0.13's shape) read too: every
//! field 0.26 added has a default.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::multipliers::Multipliers;

use super::job_config::RetryConfig;
use super::trial_config::{AgentConfig, EnvironmentConfig, TrialConfig, VerifierConfig};

/// The `schema_version` of the job lock runner writes: Harbor 0.26's `JobLock` (3). Locks of
/// earlier runners say 1.
pub const JOB_LOCK_SCHEMA: u32 = 3;

/// Harbor 0.26's `TrialLock.schema_version` (2), which each trial entry carries.
fn trial_lock_schema() -> u32 {
    2
}

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
    /// The trial's `source` (see [`crate::Dataset::trial_source`]).
    pub source: Option<String>,
    /// Task path.
    pub path: Option<String>,
    /// Harbor 0.26: a git task's URL (runner runs local tasks: null).
    #[serde(default)]
    pub git_url: Option<String>,
    /// Harbor 0.26: a git task's commit (null, as `git_url`).
    #[serde(default)]
    pub git_commit_id: Option<String>,
    /// Runner-only: the registry (URL or file) a dataset-by-name task came from; absent for
    /// a local task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
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

/// Where a registry task came from (runner-only; see [`crate::Task::origin`]): what its lock
/// entry records beside the content digest, in Harbor 0.26's `TaskLock` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskOrigin {
    /// The registry, as given (`--registry-url` or `--registry-path`).
    pub registry: String,
    /// The repository (`git_url`; `None` for a registry task on this machine).
    pub git_url: Option<String>,
    /// The commit fetched (`git_commit_id`).
    pub git_commit_id: Option<String>,
    /// The task's path in the repository (`path`).
    pub path: String,
}

impl TaskOrigin {
    /// Fills `task`'s lock fields from this origin: type `git`, its URL, commit, path and
    /// registry.
    pub fn lock_into(&self, task: &mut LockTask) {
        if self.git_url.is_some() {
            task.kind = "git".into();
        }
        task.git_url.clone_from(&self.git_url);
        task.git_commit_id.clone_from(&self.git_commit_id);
        task.path = Some(self.path.clone());
        task.registry = Some(self.registry.clone());
    }
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

/// lock.json's verifier: the trial's verifier config plus where its verification runs (Harbor
/// 0.26's `VerifierLock`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LockVerifier {
    /// The trial's verifier config.
    #[serde(flatten)]
    pub config: VerifierConfig,
    /// `shared` or `separate` (the task's verifier environment); null for a multi-step task,
    /// whose steps each resolve their own, and in locks written before schema 3.
    #[serde(default)]
    pub environment_mode: Option<String>,
}

/// The fields Harbor 0.26's `TrialLock` has beyond the trial's config, with 0.26's meanings.
/// Runner implements none of the inputs they lock (extra instructions, user agents, bridges,
/// skills, extra compose files, regrades), so each holds what 0.26 writes for a trial without
/// them; `artifacts` and `override_error_policy` are the trial's own.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TrialLock026 {
    /// The entry's format (Harbor's `TrialLock.schema_version`, 2).
    pub schema_version: u32,
    /// Install the agent and stop (never: runner refuses it).
    pub install_only: bool,
    /// Digests of extra instruction files and texts (null: none).
    pub extra_instructions: Option<Vec<serde_json::Value>>,
    /// The simulated user's config (null: none).
    pub user_agent: Option<serde_json::Value>,
    /// The simulated user's persona file digest (null).
    pub user_persona: Option<serde_json::Value>,
    /// The simulated user's prompt template digest (null).
    pub user_prompt_template: Option<serde_json::Value>,
    /// A bridge's prompt file digest (null).
    pub bridge_prompt: Option<serde_json::Value>,
    /// A bridge's input file digests by name (none).
    pub bridge_inputs: serde_json::Map<String, serde_json::Value>,
    /// The agent's skills with their digests (none).
    pub skills: Vec<serde_json::Value>,
    /// Extra compose files with their digests (null: none).
    pub extra_docker_compose: Option<Vec<serde_json::Value>>,
    /// The trial's job-level artifacts (its config's `artifacts`).
    pub artifacts: Vec<serde_json::Value>,
    /// The trial's error-policy overrides (its config's `override_error_policy`).
    pub override_error_policy: crate::error_policy::ErrorPolicyOverrides,
    /// The recorded trial a regrade derives from (null: not a regrade).
    pub source_trial: Option<serde_json::Value>,
}

impl Default for TrialLock026 {
    fn default() -> Self {
        TrialLock026 {
            schema_version: trial_lock_schema(),
            install_only: false,
            extra_instructions: None,
            user_agent: None,
            user_persona: None,
            user_prompt_template: None,
            bridge_prompt: None,
            bridge_inputs: Default::default(),
            skills: Vec::new(),
            extra_docker_compose: None,
            artifacts: Vec::new(),
            override_error_policy: Default::default(),
            source_trial: None,
        }
    }
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
    /// The verifier, with its environment mode.
    pub verifier: Arc<LockVerifier>,
    /// Harbor 0.26's other trial-lock fields (the same for every trial of a job, so held once).
    #[serde(flatten)]
    pub harbor_026: Arc<TrialLock026>,
}

impl LockTrial {
    /// Locks a trial's config: its multipliers, agent, environment, verifier (run in
    /// `verifier_mode`, see [`LockVerifier::environment_mode`]), artifacts and error-policy
    /// overrides, and `task`. (A job locks one trial per task this way and the others as
    /// clones of it renamed, so they share its parts.)
    pub fn new(config: &TrialConfig, task: LockTask, verifier_mode: Option<&str>) -> LockTrial {
        LockTrial {
            trial_name: config.trial_name.clone(),
            task: Arc::new(task),
            multipliers: config.multipliers,
            agent: Arc::new(config.agent.clone()),
            environment: Arc::new(config.environment.clone()),
            verifier: Arc::new(LockVerifier {
                config: config.verifier.clone(),
                environment_mode: verifier_mode.map(str::to_owned),
            }),
            harbor_026: Arc::new(TrialLock026 {
                artifacts: config.artifacts.clone(),
                override_error_policy: config.harbor_026.override_error_policy.clone(),
                ..TrialLock026::default()
            }),
        }
    }
}

/// `<job>/lock.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobLock {
    /// Lock schema version: [`JOB_LOCK_SCHEMA`] when runner writes it, 1 in older locks.
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

/// A lock record as Harbor 0.26 writes its locks (`model_dump_json(exclude_none=True)`): the
/// JSON of `value` without its null fields, at any depth, so the key lists of runner's lock.json
/// and Harbor's agree. Every field left out reads back as absent (`None`). For one trial's entry;
/// a whole job's lock is written through [`HarborLock`], an entry at a time.
pub fn harbor_lock_json<T: Serialize>(value: &T) -> serde_json::Result<serde_json::Value> {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.retain(|_, v| !v.is_null());
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut json = serde_json::to_value(value)?;
    strip(&mut json);
    Ok(json)
}

/// A job's lock serialized as [`harbor_lock_json`] would make it, without holding the whole
/// document as JSON values: each trial entry is made and written in turn, so writing the lock
/// of a large job costs one entry's JSON, not kilobytes per trial.
pub struct HarborLock<'a>(pub &'a JobLock);

impl Serialize for HarborLock<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap, SerializeSeq};
        /// The trials, one stripped entry at a time.
        struct Trials<'a>(&'a [LockTrial]);
        impl Serialize for Trials<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
                for trial in self.0 {
                    seq.serialize_element(&harbor_lock_json(trial).map_err(S::Error::custom)?)?;
                }
                seq.end()
            }
        }
        let lock = self.0;
        let mut map = serializer.serialize_map(None)?;
        let field =
            |map: &mut S::SerializeMap, key: &str, value: serde_json::Result<serde_json::Value>| {
                let value = value.map_err(S::Error::custom)?;
                if value.is_null() {
                    return Ok(());
                }
                map.serialize_entry(key, &harbor_lock_json(&value).map_err(S::Error::custom)?)
            };
        use serde_json::to_value;
        field(&mut map, "schema_version", to_value(lock.schema_version))?;
        field(&mut map, "created_at", to_value(lock.created_at))?;
        field(&mut map, "harbor", to_value(&lock.harbor))?;
        field(&mut map, "runner", to_value(&lock.runner))?;
        field(&mut map, "invocation", to_value(&lock.invocation))?;
        field(&mut map, "working_dir", to_value(&lock.working_dir))?;
        field(
            &mut map,
            "n_concurrent_trials",
            to_value(lock.n_concurrent_trials),
        )?;
        field(&mut map, "retry", to_value(&lock.retry))?;
        map.serialize_entry("trials", &Trials(&lock.trials))?;
        field(&mut map, "dataset_digest", to_value(&lock.dataset_digest))?;
        field(&mut map, "images", to_value(&lock.images))?;
        if !lock.engine_images.is_empty() {
            field(&mut map, "engine_images", to_value(&lock.engine_images))?;
        }
        field(
            &mut map,
            "allow_container_secrets",
            to_value(lock.allow_container_secrets),
        )?;
        map.end()
    }
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
            harbor_026: Default::default(),
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
    fn a_lock_carries_harbor_0_26_trial_fields_with_the_trials_own_values() {
        let mut config = TrialConfig {
            trial_name: "a__x".into(),
            ..TrialConfig::default()
        };
        config.harbor_026.override_error_policy =
            serde_json::from_str(r#"{"AgentTimeoutError": {"should_grade": false}}"#).unwrap();
        let trial = LockTrial::new(&config, LockTask::default(), Some("shared"));
        let json = serde_json::to_value(&trial).unwrap();
        assert_eq!(json["schema_version"], 2);
        assert_eq!(json["verifier"]["environment_mode"], "shared");
        assert_eq!(json["verifier"]["disable"], false);
        assert_eq!(
            json["override_error_policy"]["AgentTimeoutError"]["should_grade"],
            false
        );
        for key in ["bridge_inputs", "skills", "artifacts"] {
            assert!(
                json[key].as_array().is_some_and(Vec::is_empty)
                    || json[key].as_object().is_some_and(|m| m.is_empty()),
                "{key}: {}",
                json[key]
            );
        }
        for key in [
            "extra_instructions",
            "user_agent",
            "source_trial",
            "extra_docker_compose",
        ] {
            assert!(json[key].is_null(), "{key}");
        }
        for key in ["version", "git_url", "git_commit_id"] {
            assert!(json["task"][key].is_null(), "task.{key}");
        }
        // Read back unchanged.
        assert_eq!(serde_json::from_value::<LockTrial>(json).unwrap(), trial);
    }

    #[test]
    fn a_lock_is_written_without_nulls_and_reads_back_the_same() {
        let mut lock = lock_with(&["a", "b"]);
        lock.schema_version = JOB_LOCK_SCHEMA;
        let json = serde_json::to_value(HarborLock(&lock)).unwrap();
        // The same document as the whole lock stripped at once.
        assert_eq!(json, harbor_lock_json(&lock).unwrap());
        assert!(!json.to_string().contains("null"), "{json}");
        assert_eq!(json["trials"][0]["schema_version"], 2);
        assert_eq!(json["trials"][0]["task"].get("version"), None);
        assert_eq!(serde_json::from_value::<JobLock>(json).unwrap(), lock);
    }

    /// A lock.json in the shape the runner wrote before schema 3 (schema 1, from a job of
    /// runner at commit c251742 over tasks/examples, trimmed to one trial) still reads: what a
    /// resume and a merge of an older job need.
    #[test]
    fn a_lock_of_an_earlier_runner_reads() {
        let lock: JobLock = serde_json::from_str(OLD_LOCK).unwrap();
        assert_eq!(lock.schema_version, 1);
        let trial = &lock.trials[0];
        assert_eq!(trial.task.name, "examples/hello-file");
        assert_eq!(trial.verifier.environment_mode, None);
        assert_eq!(*trial.harbor_026, TrialLock026::default());
        assert_eq!(trial.task.version, None);
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

    const OLD_LOCK: &str = include_str!("../../../tests/fixtures/runner-lock-schema1.json");
}
