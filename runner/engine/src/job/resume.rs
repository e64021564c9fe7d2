//! Resuming a job: the plan made from today's flags is matched against what the job dir holds.
//!
//! Trials are matched by name, and a trial's name comes from its content-addressed identity
//! (task digest, agent, settings, resolved env, index), so the same flags find the same
//! trials and a raised `--k` only adds the missing indexes. Anything run with other settings
//! is refused with the differences named. Complete trials are never re-run, touched or
//! deleted; a trial without `result.json` (killed mid-run), an interrupted one, and one whose
//! exception `--retry-failed` names is moved under `<trial>/attempts/<n>/` and run again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use tasks::records::read::RecordError;
use tasks::records::{
    JobConfig, JobLock, JobResult, LockTrial, SharedNames, TrialConfig, TrialResult, TrialTotals,
};
use tasks::{ExceptionType, TrialOutcome, UnknownExceptionName};

use super::attempts::{kept_attempts, recover, retire};
use super::identity::{identity_differences, json_differences};
use super::plan::JobPlan;

/// What `--retry-failed` selects: an exception type (a family expands to its members) or,
/// as a runner extra, every trial of an outcome (`infra_error`, `agent_error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RerunSelector {
    /// Trials whose final exception is this type.
    Exception(ExceptionType),
    /// Trials of this outcome.
    Outcome(TrialOutcome),
}

/// Parses `--retry-failed` values; unknown names are refused (see
/// [`ExceptionType::expand_pattern`]).
pub fn parse_selectors(names: &[String]) -> Result<Vec<RerunSelector>, UnknownExceptionName> {
    let mut out = Vec::new();
    for name in names {
        match name.as_str() {
            "infra_error" => out.push(RerunSelector::Outcome(TrialOutcome::InfraError)),
            "agent_error" => out.push(RerunSelector::Outcome(TrialOutcome::AgentError)),
            _ => out.extend(
                ExceptionType::expand_pattern(name)?
                    .into_iter()
                    .map(RerunSelector::Exception),
            ),
        }
    }
    Ok(out)
}

/// Why a job dir cannot be resumed with this plan.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The dir is not a job dir this runner can resume.
    #[error("cannot resume {}: {why}", dir.display())]
    NotAJob {
        /// The job dir.
        dir: PathBuf,
        /// What is missing or unreadable.
        why: String,
    },
    /// The job was run with other settings, tasks or agent than the plan.
    #[error(
        "cannot resume {}: the job was run with different settings than these:\n{}\nresume with the flags the job \
         was started with (lock.json records its invocation; `runner jobs resume -p {}` replays it), or start a new job",
        dir.display(),
        differences.iter().map(|d| format!("  - {d}")).collect::<Vec<_>>().join("\n"),
        dir.display()
    )]
    Differs {
        /// The job dir.
        dir: PathBuf,
        /// One line per difference, naming the field.
        differences: Vec<String>,
    },
    /// Reading or moving a file failed.
    #[error("resuming {}: {source}", path.display())]
    Io {
        /// The file or dir.
        path: PathBuf,
        /// The file system's answer.
        #[source]
        source: std::io::Error,
    },
}

/// What a resume found and did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ResumeReport {
    /// Complete trials kept as they are.
    pub complete: usize,
    /// Trials moved under `attempts/` to run again, with why.
    pub rerun: Vec<(String, String)>,
    /// Planned trials the job had no dir for yet.
    pub new: usize,
    /// Trials whose interrupted move into `attempts/` was finished.
    pub recovered: Vec<String>,
}

struct Existing {
    result: Option<TrialResult>,
    config: Option<TrialConfig>,
}

/// Matches `plan` against the job in `dir` and turns it into the rest of that job: complete
/// trials go to `plan.done`, the others stay in `plan.trials` (partial ones moved aside), and
/// the plan takes the job's id, first start and lock history.
pub fn resume(
    dir: &Path,
    plan: &mut JobPlan,
    retry_failed: &[RerunSelector],
) -> Result<ResumeReport, ResumeError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ResumeError::Io { path, source }
    };
    let config: JobConfig =
        read_record(&dir.join("config.json"))?.ok_or_else(|| ResumeError::NotAJob {
            dir: dir.to_owned(),
            why: "it has no config.json, so it is not a job dir".into(),
        })?;
    let lock: Option<JobLock> = read_record(&dir.join("lock.json"))?;
    let job_result: Option<JobResult> = read_record(&dir.join("result.json"))?;
    let mut report = ResumeReport {
        recovered: recover(dir).map_err(io(dir))?,
        ..ResumeReport::default()
    };
    // Job records rewritten when the run was killed leave their temp files behind.
    tasks::atomic::remove_stale_temps(dir).map_err(io(dir))?;
    let existing = scan(dir)?;
    let mut differences = config_differences(&config, &plan.config);
    if let Some(lock) = &lock {
        differences.extend(task_differences(lock, plan));
    }
    differences.extend(trial_differences(&existing, plan));
    if !differences.is_empty() {
        return Err(ResumeError::Differs {
            dir: dir.to_owned(),
            differences,
        });
    }

    let job_id = job_result
        .as_ref()
        .map(|r| r.id.clone())
        .or_else(|| {
            existing
                .values()
                .find_map(|e| e.config.as_ref().map(|c| c.job_id.clone()))
        })
        .unwrap_or_else(|| plan.job_id.clone());
    plan.job_id = job_id.clone();
    // A merged job keeps naming its parts: its trials record their ids.
    plan.config.merged_from = config.merged_from.clone();
    plan.resumed = true;
    plan.started_at = job_result.as_ref().map(|r| r.started_at);
    if let Some(old) = &lock {
        plan.lock.created_at = old.created_at;
        let mut images = old.images.clone();
        images.extend(std::mem::take(&mut plan.lock.images));
        plan.lock.images = images;
    }
    let old_lock_trials: HashMap<&str, &LockTrial> = lock
        .iter()
        .flat_map(|l| l.trials.iter())
        .map(|t| (t.trial_name.as_str(), t))
        .collect();

    let mut remaining = Vec::new();
    let mut existing = existing;
    let mut names = SharedNames::default();
    let mut complete = std::collections::HashSet::new();
    for mut trial in std::mem::take(&mut plan.trials) {
        let name = trial.name().to_owned();
        let Some(found) = existing.remove(&name) else {
            report.new += 1;
            remaining.push(trial);
            continue;
        };
        let why = match &found.result {
            None => Some("no result.json (the run stopped inside it)".to_owned()),
            Some(result) => rerun_reason(result, retry_failed),
        };
        match (why, found.result) {
            (None, Some(mut result)) => {
                report.complete += 1;
                // A trial recorded before runner named sources as Harbor 0.26 does (the
                // dataset.toml name, not the directory's) counts under the plan's eval key,
                // so a resumed job has one key per agent and model. Its record is kept as is.
                result.source.clone_from(&trial.task_ref().source);
                plan.done.push(TrialTotals::of(&result, &mut names));
                complete.insert(name);
            }
            (Some(why), _) => {
                retire(dir, &name).map_err(io(&dir.join(&name)))?;
                trial.first_attempt = kept_attempts(&dir.join(&name)) + 1;
                report.rerun.push((name, why));
                remaining.push(trial);
            }
            (None, None) => unreachable!("a trial without a result always has a reason"),
        }
    }
    plan.trials = remaining;
    keep_lock_entries(&mut plan.lock.trials, &old_lock_trials, &complete);
    Ok(report)
}

/// Complete trials keep their lock entry as the job recorded it (the image they ran in). An
/// entry read back holds its own copy of every part; the parts equal to the plan's entry are
/// shared with it again, and equal task entries with each other, so a resumed job's lock
/// costs what a fresh one does.
fn keep_lock_entries(
    entries: &mut [LockTrial],
    old: &HashMap<&str, &LockTrial>,
    complete: &std::collections::HashSet<String>,
) {
    let mut tasks: Vec<std::sync::Arc<tasks::records::LockTask>> = Vec::new();
    for entry in entries
        .iter_mut()
        .filter(|e| complete.contains(&e.trial_name))
    {
        let Some(old) = old.get(entry.trial_name.as_str()) else {
            continue;
        };
        let mut kept = LockTrial::clone(old);
        if kept.agent == entry.agent {
            kept.agent = entry.agent.clone();
        }
        if kept.environment == entry.environment {
            kept.environment = entry.environment.clone();
        }
        // Compared without the environment mode, which a lock of schema 1 lacks: the plan's
        // entry fills it in.
        if kept.verifier.config == entry.verifier.config {
            kept.verifier = entry.verifier.clone();
        }
        if kept.harbor_026 == entry.harbor_026 {
            kept.harbor_026 = entry.harbor_026.clone();
        }
        match tasks.iter().find(|t| **t == kept.task) {
            Some(shared) => kept.task = shared.clone(),
            None => tasks.push(kept.task.clone()),
        }
        *entry = kept;
    }
}

/// Why a complete trial runs again: it was interrupted (its outcome is unknown), or
/// `--retry-failed` names its exception or outcome.
fn rerun_reason(result: &TrialResult, retry_failed: &[RerunSelector]) -> Option<String> {
    let kind = result.exception_info.as_ref().map(|e| &e.exception_type);
    if kind == Some(&ExceptionType::CancelledError) {
        return Some("interrupted (CancelledError)".into());
    }
    let outcome = result.outcome();
    retry_failed.iter().find_map(|selector| match selector {
        RerunSelector::Exception(k) if Some(k) == kind => Some(format!("--retry-failed {k}")),
        RerunSelector::Outcome(o) if *o == outcome => Some(format!("--retry-failed {o}")),
        _ => None,
    })
}

/// The trial dirs of the job: direct children, not hidden, by name.
fn scan(dir: &Path) -> Result<BTreeMap<String, Existing>, ResumeError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ResumeError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mut out = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        // A record that does not parse is treated as missing: the trial runs again and the
        // unreadable attempt is kept.
        let result = read_record::<TrialResult>(&path.join("result.json"))
            .ok()
            .flatten();
        let config = read_record::<TrialConfig>(&path.join("config.json"))
            .ok()
            .flatten()
            .or_else(|| result.as_ref().map(|r| r.config.clone()));
        out.insert(name, Existing { result, config });
    }
    Ok(out)
}

pub(super) fn read_record<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, ResumeError> {
    tasks::records::read::read_typed(path).map_err(|e| match e {
        RecordError::Unreadable { path, source } => ResumeError::Io { path, source },
        RecordError::Malformed { path, problem } => ResumeError::NotAJob {
            dir: path.parent().unwrap_or(&path).to_owned(),
            why: format!("{}: {problem}", path.display()),
        },
    })
}

/// The job-level settings that define a job's trials (force-build, concurrency and
/// retries do not), as JSON, so differences can be named by path.
pub(super) fn defining(c: &JobConfig) -> serde_json::Value {
    let mut environment = serde_json::json!(c.environment);
    if let Some(map) = environment.as_object_mut() {
        map.remove("force_build");
    }
    serde_json::json!({
        "agents": c.agents,
        "multipliers": c.multipliers,
        "environment": environment,
        "verifier": c.verifier,
        "instruction_suffix": c.instruction_suffix,
        "allow_container_secrets": c.allow_container_secrets,
        "artifacts": c.artifacts,
        "extra_instruction_paths": c.extra_instruction_paths,
        // Decides which failures are verified after (and retried): part of the plan.
        "override_error_policy": c.harbor_026.override_error_policy,
    })
}

/// Job-level settings that define the job's trials: the agent, multipliers, limits and
/// overrides. k may grow, never shrink; concurrency, retries and force-build may change.
pub(super) fn config_differences(old: &JobConfig, new: &JobConfig) -> Vec<String> {
    let mut out = Vec::new();
    if (old.shard, old.n_shards) != (new.shard, new.n_shards) {
        let part = |c: &JobConfig| match (c.shard, c.n_shards) {
            (Some(i), Some(n)) => format!("--shard {i}/{n}"),
            _ => "the whole plan (no --shard)".to_owned(),
        };
        out.push(format!(
            "shard: {} in the job, {} now; resume a shard with the --shard it was started with",
            part(old),
            part(new)
        ));
    }
    let (a, b) = (defining(old), defining(new));
    out.extend(
        json_differences("config", &a, &b)
            .into_iter()
            .map(|(path, was, now)| {
                let path = path.trim_start_matches("config.");
                format!("{path}: {was} in the job, {now} now")
            }),
    );
    if new.n_attempts < old.n_attempts {
        out.push(format!(
            "k: the job has k={}, and --k {} would leave trials beyond it; pass --k {} or more",
            old.n_attempts, new.n_attempts, old.n_attempts
        ));
    }
    out
}

/// The tasks: the same names with the same content digests.
fn task_differences(lock: &JobLock, plan: &JobPlan) -> Vec<String> {
    let old: BTreeMap<&str, &str> = lock
        .trials
        .iter()
        .map(|t| (t.task.name.as_str(), t.task.digest.as_str()))
        .collect();
    let new: BTreeMap<&str, &str> = plan
        .lock
        .trials
        .iter()
        .map(|t| (t.task.name.as_str(), t.task.digest.as_str()))
        .collect();
    let mut out = Vec::new();
    for (task, digest) in &old {
        match new.get(task) {
            None => out.push(format!(
                "task {task}: in the job, but not in the dataset now (or skipped as malformed)"
            )),
            Some(now) if now != digest => out.push(format!(
                "task {task}: content digest {digest} in the job, {now} now (the task changed)"
            )),
            Some(_) => {}
        }
    }
    for task in new.keys().filter(|t| !old.contains_key(*t)) {
        out.push(format!(
            "task {task}: in the dataset now, but not in the job (a resume does not add tasks)"
        ));
    }
    out
}

/// Trial dirs no planned trial has the name of: named by what differs from the planned trial
/// of the same task and index. The same difference found in many trials is listed once.
fn trial_differences(existing: &BTreeMap<String, Existing>, plan: &JobPlan) -> Vec<String> {
    let planned: BTreeSet<&str> = plan.trials.iter().map(|t| t.name()).collect();
    let mut lines: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (name, found) in existing {
        if planned.contains(name.as_str()) {
            continue;
        }
        let Some(config) = &found.config else {
            lines
                .entry("it has no readable config.json (not a trial this runner wrote)".into())
                .or_default()
                .push(name);
            continue;
        };
        let index = config.identity.as_ref().map(|i| i.index);
        let twin = plan.trials.iter().find(|t| {
            Some(t.index()) == index
                && t.task_ref().path == config.task.path
                && t.task_ref().name == config.task.name
        });
        let found_lines = match (twin, index) {
            (Some(twin), _) => {
                let d = identity_differences(config, &twin.config(&plan.job_id));
                if d.is_empty() {
                    vec!["its identity key differs though every recorded field matches (written by another runner version?)".to_owned()]
                } else {
                    d
                }
            }
            (None, Some(i)) if i >= plan.config.n_attempts => vec![format!(
                "it is trial {} of its task, beyond --k {}",
                i + 1,
                plan.config.n_attempts
            )],
            (None, _) => vec!["its task is not planned now".to_owned()],
        };
        for line in found_lines {
            lines.entry(line).or_default().push(name);
        }
    }
    lines
        .into_iter()
        .map(|(line, trials)| match trials.as_slice() {
            [one] => format!("{line} (trial {one})"),
            [first, rest @ ..] => format!("{line} (trial {first} and {} more)", rest.len()),
            [] => line,
        })
        .collect()
}
