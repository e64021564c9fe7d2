//! One job directory: its config, its trial dirs, and the rules that look at the job alone
//! (job overrides, container secrets, provider keys in job-level files).

use std::path::{Path, PathBuf};

use serde_json::Value;
use tasks::records::read::RecordError;

use super::images::{TrialImage, from_lock};
use super::overrides::overrides;
use super::report::Violation;
use super::{Rule, SubmissionError, files, scan};

/// An entry of the job config's `agents[]`.
#[derive(Debug, Clone)]
pub struct JobAgent {
    /// `name`; null when launched from a bare import path.
    pub name: Option<String>,
    /// `model_name`, `provider/name`.
    pub model: Option<String>,
    /// Runner-only `models`: every model the LLM bridge let its trials call (empty for jobs
    /// without a bridge and for Harbor's).
    pub models: Vec<String>,
}

/// A loaded job dir.
#[derive(Debug)]
pub struct Job {
    /// The dir as given, for display.
    pub display: String,
    /// `agents[]` of the job config.
    pub agents: Vec<JobAgent>,
    /// Trial dirs: subdirs with a config.json or a result.json, sorted.
    pub trial_dirs: Vec<PathBuf>,
    /// Violations of job-level rules.
    pub violations: Vec<Violation>,
    /// The image each trial ran on, from `lock.json` (runner's locks only).
    pub images: Vec<TrialImage>,
    /// The job's id (`result.json` `id`), if recorded.
    pub id: Option<String>,
    /// Runner-only `merged_from` of the job config: the ids of the jobs `runner merge` made
    /// this one from, which its trials record as their job id.
    pub merged_from: Vec<String>,
    /// The trials `lock.json` planned; `None` when the job has no readable lock.
    pub plan: Option<super::planned::Plan>,
}

/// A job-level JSON record, read through the records' one reader. One over the size cap is
/// a bad record, like one that is not JSON; other read failures are the OS's.
fn read_json(path: &Path) -> Result<Option<Value>, SubmissionError> {
    tasks::records::read::read_json(path).map_err(|e| {
        let bad = |problem: String| SubmissionError::BadJobConfig {
            path: path.to_owned(),
            problem,
        };
        match e {
            RecordError::Unreadable { source, .. }
                if source.kind() == std::io::ErrorKind::FileTooLarge =>
            {
                bad(source.to_string())
            }
            RecordError::Unreadable { source, .. } => SubmissionError::io(path, source),
            RecordError::Malformed { problem, .. } => bad(problem),
        }
    })
}

/// Loads the job dir `dir` (shown as `display`) and checks the job-level rules.
pub fn load(dir: &Path, display: String) -> Result<Job, SubmissionError> {
    let config = read_config(dir)?;
    let config_file = format!("{display}/config.json");
    let mut violations = check_config(&config, &config_file);
    let lock = read_lock(dir, &display, &mut violations);
    let id = read_json(&dir.join("result.json"))
        .ok()
        .flatten()
        .and_then(|r| r.get("id")?.as_str().map(str::to_owned));
    let plan = lock.as_ref().map(super::planned::Plan::of_lock);
    let merged_from = config
        .get("merged_from")
        .and_then(Value::as_array)
        .map(|ids| strings(ids))
        .unwrap_or_default();
    let agents = config
        .get("agents")
        .and_then(Value::as_array)
        .map(|agents| agents.iter().map(job_agent).collect())
        .unwrap_or_default();
    let trial_dirs = find_trials(dir, &display, &mut violations)?;
    let images = lock
        .map(|lock| from_lock(&lock, &display, &trial_dirs))
        .unwrap_or_default();
    Ok(Job {
        display,
        agents,
        trial_dirs,
        violations,
        images,
        id,
        merged_from,
        plan,
    })
}

/// The job's config.json: a job dir has one, and it is a JSON object.
fn read_config(dir: &Path) -> Result<Value, SubmissionError> {
    if !dir.is_dir() {
        return Err(SubmissionError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let config_path = dir.join("config.json");
    let Some(config) = read_json(&config_path)? else {
        return Err(SubmissionError::NotAJob {
            path: dir.to_owned(),
        });
    };
    if !config.is_object() {
        return Err(SubmissionError::BadJobConfig {
            path: config_path,
            problem: "not a JSON object".into(),
        });
    }
    Ok(config)
}

/// The job-level rules on the job config (`config_file` as shown).
fn check_config(config: &Value, config_file: &str) -> Vec<Violation> {
    let mut violations = Vec::new();
    for problem in overrides(config) {
        violations.push(Violation::new(
            Rule::NoJobOverrides,
            Some(config_file.to_owned()),
            problem,
        ));
    }
    if config
        .get("allow_container_secrets")
        .and_then(Value::as_bool)
        == Some(true)
    {
        violations.push(Violation::new(
            Rule::NoContainerSecrets,
            Some(config_file.to_owned()),
            "allow_container_secrets is true: credentials were passed into containers, so the run is not \
             publishable; rerun without --allow-container-secrets",
        ));
    }
    let datasets_named = config
        .get("datasets")
        .and_then(Value::as_array)
        .is_some_and(|d| !d.is_empty());
    if !datasets_named {
        violations.push(Violation::new(
            Rule::DatasetConfig,
            Some(config_file.to_owned()),
            "datasets list is empty: the job config does not name the dataset it ran (Harbor's validator fails this too); run the job on the dataset, not on single tasks",
        ));
    }
    violations
}

/// The job's lock.json, if readable, after checking its secrets opt-in. A lock.json that
/// cannot be read is not this rule's business; Harbor jobs may lack it.
fn read_lock(dir: &Path, display: &str, violations: &mut Vec<Violation>) -> Option<Value> {
    let lock_path = dir.join("lock.json");
    let lock_file = Some(format!("{display}/lock.json"));
    let max = tasks::bounded::MAX_RECORD_BYTES;
    match tasks::bounded::read_capped(&lock_path, max, "job record") {
        Ok(bytes) => {
            let lock = serde_json::from_slice::<Value>(&bytes).ok();
            let opted_in = lock
                .as_ref()
                .and_then(|lock| lock.get("allow_container_secrets")?.as_bool());
            if opted_in == Some(true) {
                violations.push(Violation::new(
                    Rule::NoContainerSecrets,
                    lock_file,
                    "allow_container_secrets is true: credentials were passed into containers, so the run is not \
                     publishable; rerun without --allow-container-secrets",
                ));
            }
            lock
        }
        // One too large to read could hide the opt-in, so it fails the rule.
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            violations.push(Violation::new(
                Rule::NoContainerSecrets,
                lock_file,
                format!("cannot be checked: {e}"),
            ));
            None
        }
        Err(_) => None,
    }
}

/// The strings of a JSON array (others left out).
fn strings(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// One `agents[]` entry of the job config.
fn job_agent(agent: &Value) -> JobAgent {
    let text = |key: &str| agent.get(key).and_then(Value::as_str).map(str::to_owned);
    JobAgent {
        name: text("name"),
        model: text("model_name"),
        models: agent
            .get("models")
            .and_then(Value::as_array)
            .map(|models| strings(models))
            .unwrap_or_default(),
    }
}

/// The job's trial dirs (subdirs with a config.json or result.json), sorted; every other
/// file is scanned for keys.
fn find_trials(
    dir: &Path,
    display: &str,
    violations: &mut Vec<Violation>,
) -> Result<Vec<PathBuf>, SubmissionError> {
    let mut trial_dirs = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| SubmissionError::io(dir, e))?;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if kind.is_dir() {
            if path.join("config.json").is_file() || path.join("result.json").is_file() {
                trial_dirs.push(path);
            } else {
                scan_tree(&path, &format!("{display}/{name}"), violations);
            }
        } else if kind.is_file() {
            scan_file(&path, &format!("{display}/{name}"), violations);
        }
    }
    trial_dirs.sort();
    if trial_dirs.is_empty() {
        violations.push(Violation::new(
            Rule::TrialResultsComplete,
            Some(display.to_owned()),
            "the job dir has no trials (no subdirectory with a config.json or result.json), so it is not a \
             submission; pass a job dir whose trials have run",
        ));
    }
    Ok(trial_dirs)
}

fn scan_tree(dir: &Path, display: &str, violations: &mut Vec<Violation>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let shown = format!("{display}/{}", entry.file_name().to_string_lossy());
        if kind.is_dir() {
            scan_tree(&entry.path(), &shown, violations);
        } else if kind.is_file() {
            scan_file(&entry.path(), &shown, violations);
        }
    }
}

fn scan_file(path: &Path, display: &str, violations: &mut Vec<Violation>) {
    let Ok(lines) = files::key_lines_in_file(path) else {
        return;
    };
    violations.extend(scan::violations_at_lines(lines, display));
}
