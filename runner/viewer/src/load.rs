//! A job directory, runner's or Harbor's, read as JSON values so every shape Harbor has
//! written (and runner's additions) is accepted; what cannot be read is noted, not fatal.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tasks::records::{read, str_at};

use crate::ViewerError;
use crate::files::{self, Json};

/// The name trials without a recorded task are grouped under.
pub const UNKNOWN_TASK: &str = "(unknown task)";

/// The phases of a trial in the order they run, with their result.json keys.
pub const PHASES: [(&str, &str); 4] = [
    ("environment_setup", "environment setup"),
    ("agent_setup", "agent setup"),
    ("agent_execution", "agent execution"),
    ("verifier", "verifier"),
];

/// One phase's timing.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// Human name.
    pub name: &'static str,
    /// Start as recorded.
    pub started_at: Option<String>,
    /// End as recorded.
    pub finished_at: Option<String>,
    /// `finished_at − started_at` when both parse.
    pub seconds: Option<f64>,
}

/// `exception_info`.
#[derive(Debug, Clone, PartialEq)]
pub struct Exception {
    /// Harbor's exception class name.
    pub kind: String,
    /// The message.
    pub message: String,
    /// The traceback (Python's, or runner's phase trace).
    pub traceback: String,
    /// When.
    pub occurred_at: Option<String>,
}

/// A named check of the verifier (runner's `verifier_result.checks`).
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Test name.
    pub name: String,
    /// `passed`, `failed`, ….
    pub status: String,
}

/// One step of a multi-step trial (Harbor's `step_results`); its files are under
/// `steps/<name>/` of the trial dir.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// `step_name`.
    pub name: String,
    /// The step's own rewards (its tests), in file order.
    pub rewards: Vec<(String, f64)>,
    /// The step's first failure.
    pub exception: Option<Exception>,
    /// Its agent run's start, end and duration.
    pub agent: Phase,
    /// Its verification's start, end and duration.
    pub verifier: Phase,
}

/// Token usage and cost: one trial's as the agent reported them (`agent_result`), or the
/// totals over the trials that reported them. `None` where nothing was reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub input_tokens: Option<u64>,
    /// Cached input tokens.
    pub cache_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Adds `other`'s figures to these; a figure stays `None` until some trial reports it.
    pub fn add(&mut self, other: &Usage) {
        fn sum<T: std::ops::Add<Output = T> + Default + Copy>(
            total: &mut Option<T>,
            value: Option<T>,
        ) {
            if let Some(v) = value {
                *total = Some(total.unwrap_or_default() + v);
            }
        }
        sum(&mut self.input_tokens, other.input_tokens);
        sum(&mut self.cache_tokens, other.cache_tokens);
        sum(&mut self.output_tokens, other.output_tokens);
        sum(&mut self.cost_usd, other.cost_usd);
    }
}

/// One trial directory.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The trial dir.
    pub dir: PathBuf,
    /// Its name (the dir's name).
    pub name: String,
    /// Task name (`task_name`, `config.task.name`, or the last part of `config.task.path`).
    pub task: String,
    /// Whether result.json was read: the trial finished.
    pub finished: bool,
    /// `verifier_result.rewards` in file order (numbers; booleans as 1/0).
    pub rewards: Vec<(String, f64)>,
    /// `exception_info`, when one was recorded.
    pub exception: Option<Exception>,
    /// `agent_info.name`.
    pub agent: Option<String>,
    /// `provider/name` from `agent_info.model_info`.
    pub model: Option<String>,
    /// `source`: the dataset.
    pub source: Option<String>,
    /// Trial start.
    pub started_at: Option<String>,
    /// Trial end.
    pub finished_at: Option<String>,
    /// Trial duration in seconds.
    pub seconds: Option<f64>,
    /// Phase timings (all four, absent ones with no times).
    pub phases: Vec<Phase>,
    /// The steps of a multi-step trial, in the order they ran (empty for one-step trials).
    pub steps: Vec<Step>,
    /// Token usage.
    pub usage: Usage,
    /// Named verifier checks.
    pub checks: Vec<Check>,
    /// `verifier_toolchain_changes` (runner-only): the tests' programs and startup hooks the
    /// agent changed.
    pub toolchain_changes: Vec<String>,
    /// `verifier_isolation.toolchain`: whose programs ran the tests (`image` or `agent`).
    pub toolchain: Option<String>,
    /// `network_attempts` (runner-only): attempts through the egress proxy of an allowlist
    /// task and how many were refused, by phase, as (phase, attempts, refused).
    pub network_attempts: Vec<(String, u64, u64)>,
    /// What could not be read in this trial dir.
    pub problems: Vec<String>,
}

impl Trial {
    /// The main reward (see [`tasks::metrics::main_reward`], as the runner and the
    /// leaderboard read it); `None` without rewards.
    pub fn reward(&self) -> Option<f64> {
        tasks::metrics::main_reward(
            self.rewards
                .iter()
                .map(|(name, value)| (name.as_str(), *value)),
        )
    }

    /// The reward named `key`, if recorded.
    pub fn reward_of(&self, key: &str) -> Option<f64> {
        self.rewards.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// One job directory.
#[derive(Debug, Clone)]
pub struct Job {
    /// The job dir as given.
    pub dir: PathBuf,
    /// `job_name`, else the dir's name.
    pub name: String,
    /// The job's config.json.
    pub config: Option<Value>,
    /// The job's result.json.
    pub result: Option<Value>,
    /// Trial dirs, by name.
    pub trials: Vec<Trial>,
    /// What could not be read at the job level.
    pub problems: Vec<String>,
}

/// Parses Harbor's timestamps: RFC 3339 with an offset, or naive local time (Harbor 0.13
/// writes both); naive ones are taken as UTC, which is right for differences.
pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
                .ok()
                .map(|t| t.and_utc())
        })
}

fn seconds_between(start: Option<&str>, end: Option<&str>) -> Option<f64> {
    let (start, end) = (parse_time(start?)?, parse_time(end?)?);
    Some((end - start).num_milliseconds() as f64 / 1000.0)
}

fn record(base: &Path, rel: &str, problems: &mut Vec<String>) -> Option<Value> {
    match files::read_json(base, rel, files::MAX_RECORD_BYTES) {
        Json::Absent => None,
        Json::TooLarge(why) | Json::Invalid(why) => {
            problems.push(format!("{rel}: {why}"));
            None
        }
        Json::Value(v) if v.is_object() => Some(v),
        Json::Value(_) => {
            problems.push(format!("{rel}: not a JSON object"));
            None
        }
    }
}

fn rewards_of(result: &Value, problems: &mut Vec<String>) -> Vec<(String, f64)> {
    let Some(map) = read::rewards_object(result) else {
        return Vec::new();
    };
    let mut rewards = Vec::new();
    for (key, value) in map {
        match read::reward_number(value) {
            Some(v) => rewards.push((key.clone(), v)),
            None => problems.push(format!("result.json: reward `{key}` is not a number")),
        }
    }
    rewards
}

/// `record`'s `exception_info` (a trial's or a step's), when one was recorded.
fn exception_of(record: &Value) -> Option<Exception> {
    record
        .get("exception_info")
        .filter(|e| e.is_object())
        .map(|e| Exception {
            kind: str_at(e, "/exception_type")
                .unwrap_or(tasks::ExceptionType::UNKNOWN_NAME)
                .to_owned(),
            message: text(e, "exception_message"),
            traceback: text(e, "exception_traceback"),
            occurred_at: str_at(e, "/occurred_at").map(str::to_owned),
        })
}

/// The timing `record[key]` (a trial's or a step's), named `name`; no times when absent.
fn phase_of(record: &Value, key: &str, name: &'static str) -> Phase {
    let timing = record.get(key).filter(|t| t.is_object());
    let at = |field: &str| timing.and_then(|t| str_at(t, field)).map(str::to_owned);
    let (started_at, finished_at) = (at("/started_at"), at("/finished_at"));
    Phase {
        name,
        seconds: seconds_between(started_at.as_deref(), finished_at.as_deref()),
        started_at,
        finished_at,
    }
}

fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Reads one trial dir.
pub fn load_trial(dir: &Path) -> Trial {
    let mut problems = Vec::new();
    let config = record(dir, "config.json", &mut problems);
    let result = record(dir, "result.json", &mut problems);
    let trial_config = read::trial_config(config.as_ref(), result.as_ref());
    let task = read::task_name(result.as_ref(), trial_config)
        .unwrap_or(UNKNOWN_TASK)
        .to_owned();
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut trial = Trial {
        dir: dir.to_path_buf(),
        name,
        task,
        finished: result.is_some(),
        rewards: Vec::new(),
        exception: None,
        agent: None,
        model: None,
        source: trial_config
            .and_then(|c| str_at(c, "/task/source"))
            .map(str::to_owned),
        started_at: None,
        finished_at: None,
        seconds: None,
        phases: PHASES
            .iter()
            .map(|(_, name)| Phase {
                name,
                started_at: None,
                finished_at: None,
                seconds: None,
            })
            .collect(),
        steps: Vec::new(),
        usage: Usage::default(),
        checks: Vec::new(),
        toolchain_changes: Vec::new(),
        toolchain: None,
        network_attempts: Vec::new(),
        problems: Vec::new(),
    };
    trial.agent = trial_config
        .and_then(|c| str_at(c, "/agent/name"))
        .map(str::to_owned);
    trial.model = trial_config
        .and_then(|c| str_at(c, "/agent/model_name"))
        .map(str::to_owned);
    if let Some(result) = &result {
        read_result(&mut trial, result, &mut problems);
    }
    trial.problems = problems;
    trial
}

fn read_result(trial: &mut Trial, result: &Value, problems: &mut Vec<String>) {
    trial.rewards = rewards_of(result, problems);
    trial.exception = exception_of(result);
    if let Some(name) = str_at(result, "/agent_info/name") {
        trial.agent = Some(name.to_owned());
    }
    if let Some(model) = result.get("agent_info").and_then(read::model_of) {
        trial.model = Some(model);
    }
    if let Some(source) = str_at(result, "/source") {
        trial.source = Some(source.to_owned());
    }
    trial.toolchain = str_at(result, "/verifier_isolation/toolchain").map(str::to_owned);
    if let Some(phases) = result.get("network_attempts").and_then(Value::as_object) {
        let count = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
        trial.network_attempts = phases
            .iter()
            .map(|(phase, v)| (phase.clone(), count(v, "attempts"), count(v, "refused")))
            .collect();
    }
    trial.toolchain_changes = result
        .get("verifier_toolchain_changes")
        .and_then(Value::as_array)
        .map(|changes| {
            changes
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    trial.started_at = str_at(result, "/started_at").map(str::to_owned);
    trial.finished_at = str_at(result, "/finished_at").map(str::to_owned);
    trial.seconds = seconds_between(trial.started_at.as_deref(), trial.finished_at.as_deref());
    for (phase, (key, name)) in trial.phases.iter_mut().zip(PHASES) {
        *phase = phase_of(result, key, name);
    }
    if let Some(steps) = result.get("step_results").and_then(Value::as_array) {
        trial.steps = steps
            .iter()
            .filter(|step| step.is_object())
            .map(|step| Step {
                name: text(step, "step_name"),
                rewards: rewards_of(step, problems),
                exception: exception_of(step),
                agent: phase_of(step, "agent_execution", "agent execution"),
                verifier: phase_of(step, "verifier", "verifier"),
            })
            .collect();
    }
    if let Some(context) = result.get("agent_result").filter(|c| c.is_object()) {
        trial.usage = Usage {
            input_tokens: context.get("n_input_tokens").and_then(Value::as_u64),
            cache_tokens: context.get("n_cache_tokens").and_then(Value::as_u64),
            output_tokens: context.get("n_output_tokens").and_then(Value::as_u64),
            cost_usd: context.get("cost_usd").and_then(Value::as_f64),
        };
    }
    if let Some(checks) = result
        .pointer("/verifier_result/checks")
        .and_then(Value::as_array)
    {
        trial.checks = checks
            .iter()
            .map(|c| Check {
                name: text(c, "name"),
                status: text(c, "status"),
            })
            .collect();
    }
}

/// Reads the job dir `dir`: its config and result, and every subdir holding a config.json or
/// result.json as a trial. A dir with none of these is not a job.
pub fn load_job(dir: &Path) -> Result<Job, ViewerError> {
    if !dir.is_dir() {
        return Err(ViewerError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let mut problems = Vec::new();
    let config = record(dir, "config.json", &mut problems);
    let result = record(dir, "result.json", &mut problems);
    let entries = std::fs::read_dir(dir).map_err(|source| ViewerError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut trial_dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| {
            files::regular_file(p, "config.json").is_some()
                || files::regular_file(p, "result.json").is_some()
        })
        .collect();
    trial_dirs.sort();
    if config.is_none() && result.is_none() {
        if trial_dirs.is_empty() {
            return Err(ViewerError::NotAJob {
                path: dir.to_path_buf(),
            });
        }
        // Trial configs have `trial_name`; a subdir whose config has `job_name` is a job.
        let job_dir = trial_dirs.iter().find(|d| {
            matches!(files::read_json(d, "config.json", files::MAX_RECORD_BYTES),
                Json::Value(v) if v.get("job_name").is_some())
        });
        if let Some(example) = job_dir {
            return Err(ViewerError::JobsDir {
                path: dir.to_path_buf(),
                example: example.clone(),
            });
        }
    }
    let name = config
        .as_ref()
        .and_then(|c| str_at(c, "/job_name"))
        .map(str::to_owned)
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string());
    Ok(Job {
        dir: dir.to_path_buf(),
        name,
        config,
        result,
        trials: trial_dirs.iter().map(|d| load_trial(d)).collect(),
        problems,
    })
}
