//! One trial directory: the facts the cross-trial rules need, and the rules that look at a
//! single trial (overrides, completeness, trajectory, provider keys).

use std::path::Path;

use serde_json::Value;
use tasks::records::{read, str_at};

use super::overrides::overrides;
use super::report::Violation;
use super::{Rule, files, scan};

/// At most this many ATIF errors are listed per trajectory; the rest are counted.
const MAX_ATIF_ERRORS: usize = 10;

/// The agent a trial recorded in `agent_info`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AgentIdentity {
    /// `agent_info.name`.
    pub name: String,
    /// `provider/name` from `agent_info.model_info`, or the bare name without a provider.
    pub model: Option<String>,
}

/// What one trial directory says, plus its own violations.
#[derive(Debug)]
pub struct TrialFacts {
    /// Index of the job dir it belongs to.
    pub job: usize,
    /// The trial dir's name.
    pub name: String,
    /// The trial dir as displayed (under the job dir as given).
    pub display: String,
    /// Task name, if recorded anywhere.
    pub task: Option<String>,
    /// `config.task.ref` (or `task_id.ref`), if recorded.
    pub task_ref: Option<String>,
    /// The main reward; `None` without rewards.
    pub reward: Option<f64>,
    /// `exception_info.exception_type`, if an exception was recorded.
    pub exception_type: Option<String>,
    /// `agent_info`, when result.json has it.
    pub agent: Option<AgentIdentity>,
    /// `agent_info.version`, when recorded.
    pub agent_version: Option<String>,
    /// The job id the trial records (`config.job_id`), if any.
    pub job_id: Option<String>,
    /// The trial's recorded name (`trial_name`), else its directory's name.
    pub trial_name: String,
    /// The models the trial called through runner's LLM bridge
    /// (`agent_result.metadata.llm_bridge.models_called`); `None` without bridge metering.
    pub models_called: Option<Vec<String>>,
    /// What the record says of the verifier's isolation (runner-only).
    pub isolation: Isolation,
    /// Why the tests cannot be trusted to have run with the task's own programs: they ran
    /// with programs the agent changed (`--agent-toolchain`); `None` otherwise.
    pub agent_toolchain: Option<String>,
    /// Violations found in this trial alone.
    pub violations: Vec<Violation>,
}

/// What a trial's record says of its verifier's isolation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Isolation {
    /// No `verifier_isolation` (Harbor never writes it; a trial with no result either).
    #[default]
    NotRecorded,
    /// `isolated: true`.
    Isolated,
    /// `isolated: false`, or a value that is not a boolean: why, and what to do.
    Unisolated(String),
}

impl TrialFacts {
    /// True when the trial earned a reward above 0.
    pub fn rewarded(&self) -> bool {
        self.reward.is_some_and(|r| r > 0.0)
    }
}

/// The main reward of a result (see [`tasks::records::read::main_reward`]); booleans are 1/0.
pub fn reward_of(result: &Value) -> Option<f64> {
    read::main_reward(result)
}

/// What a result's `verifier_isolation` says: runner records `isolated: true`, or `false`
/// with its reason; Harbor writes no such field.
fn isolation_of(result: &Value) -> Isolation {
    let Some(isolation) = result.get("verifier_isolation").filter(|v| !v.is_null()) else {
        return Isolation::NotRecorded;
    };
    match isolation.get("isolated").and_then(Value::as_bool) {
        Some(true) => Isolation::Isolated,
        Some(false) => Isolation::Unisolated(format!(
            "the verifier ran in the agent's sandbox without isolation ({}): the agent's leftovers could change what the tests read; re-run where runner can isolate the verifier",
            str_at(isolation, "/detail").unwrap_or("no reason recorded")
        )),
        None => Isolation::Unisolated("verifier_isolation.isolated is not true or false".into()),
    }
}

/// Why a rewarded trial's tests cannot be trusted to have run with the task's own programs:
/// the job opted into the agent's (`verifier_isolation.toolchain: "agent"`,
/// `--agent-toolchain`) and the agent had changed some of them (`verifier_toolchain_changes`).
fn agent_toolchain_used(result: &Value) -> Option<String> {
    if str_at(result, "/verifier_isolation/toolchain") != Some("agent") {
        return None;
    }
    let changes: Vec<&str> = result
        .get("verifier_toolchain_changes")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let first = changes.first()?;
    Some(format!(
        "the tests ran with programs or startup hooks the agent changed (--agent-toolchain): {first}{}; a reward earned that way may be the agent's own doing: re-run without --agent-toolchain",
        match changes.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        }
    ))
}

/// What is wrong with the rewards of a result, if anything: a value that is not a finite
/// number (or a boolean), or a main reward outside [0, 1] (no task format declares another
/// range: Harbor's task.toml has no such field).
fn reward_problems(result: &Value) -> Vec<String> {
    let Some(rewards) = result
        .get("verifier_result")
        .and_then(|v| v.get("rewards"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for (name, value) in rewards {
        let finite = value.as_f64().is_some_and(f64::is_finite) || value.is_boolean();
        if !finite {
            problems.push(format!(
                "reward {name:?} is {}, not a finite number",
                short_value(value)
            ));
        }
    }
    if let Some(main) = reward_of(result)
        && main.is_finite()
        && !(0.0..=1.0).contains(&main)
    {
        problems.push(format!(
            "the main reward is {}, outside [0, 1]; a leaderboard's accuracy and mean reward assume rewards in [0, 1]",
            Value::from(main)
        ));
    }
    problems
}

fn short_value(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

fn has_rewards(result: &Value) -> bool {
    result
        .get("verifier_result")
        .and_then(|v| v.get("rewards"))
        .and_then(Value::as_object)
        .is_some_and(|r| !r.is_empty())
}

/// The agent identity of `agent_info`; a provider of `unknown` is no provider (as the
/// leaderboard's filter treats it).
pub fn agent_identity(result: &Value) -> Option<AgentIdentity> {
    let info = result.get("agent_info")?;
    let name = info.get("name")?.as_str()?.to_owned();
    Some(AgentIdentity {
        name,
        model: read::model_of(info),
    })
}

/// Files of a trial dir that the rules read, kept while the tree is scanned. A file over its
/// cap is not kept; its cap error is kept instead.
#[derive(Default)]
struct Kept {
    config: Option<Result<Vec<u8>, String>>,
    result: Option<Result<Vec<u8>, String>>,
    trajectory: Option<Result<Vec<u8>, String>>,
}

/// The cap of a kept file, or `None` for files that are only scanned.
fn cap_of(rel: &str) -> Option<(u64, &'static str)> {
    use tasks::bounded::{MAX_RECORD_BYTES, MAX_TRAJECTORY_BYTES};
    match rel {
        "config.json" | "result.json" => Some((MAX_RECORD_BYTES, "trial record")),
        "agent/trajectory.json" => Some((MAX_TRAJECTORY_BYTES, "trajectory")),
        _ => None,
    }
}

/// Reads every file under `dir` once: scans it for keys and keeps the ones the rules parse.
/// Kept files are read whole up to their cap; every other file is scanned in chunks.
fn read_tree(
    dir: &Path,
    rel: &str,
    display: &str,
    kept: &mut Kept,
    violations: &mut Vec<Violation>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        violations.push(Violation::new(
            Rule::NoProviderKeys,
            Some(format!("{display}/{rel}")),
            "cannot list directory",
        ));
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let child_rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if kind.is_dir() {
            read_tree(&entry.path(), &child_rel, display, kept, violations);
        } else if kind.is_file() {
            let file = format!("{display}/{child_rel}");
            let path = entry.path();
            let mut keep = None;
            let scanned = match cap_of(&child_rel) {
                Some((cap, what)) => match tasks::bounded::read_capped(&path, cap, what) {
                    Ok(bytes) => {
                        let lines = scan::key_lines(&bytes);
                        keep = Some(Ok(bytes));
                        Ok(lines)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                        keep = Some(Err(e.to_string()));
                        files::key_lines_in_file(&path)
                    }
                    Err(e) => Err(e),
                },
                None => files::key_lines_in_file(&path),
            };
            let lines = match scanned {
                Ok(lines) => lines,
                Err(e) => {
                    violations.push(Violation::new(
                        Rule::NoProviderKeys,
                        Some(file),
                        format!("cannot read: {e}"),
                    ));
                    continue;
                }
            };
            violations.extend(scan::violations_at_lines(lines, &file));
            match child_rel.as_str() {
                "config.json" => kept.config = keep,
                "result.json" => kept.result = keep,
                "agent/trajectory.json" => kept.trajectory = keep,
                _ => {}
            }
        }
        // Symlinks are not followed: they may point outside the submission.
    }
}

/// A kept file's bytes, or `None` after recording why it is unusable (over its cap).
fn usable<'k>(
    kept: &'k Option<Result<Vec<u8>, String>>,
    file: &str,
    rule: Rule,
    violations: &mut Vec<Violation>,
) -> Option<&'k [u8]> {
    match kept.as_ref()? {
        Ok(bytes) => Some(bytes),
        Err(problem) => {
            violations.push(Violation::new(rule, Some(file.to_owned()), problem.clone()));
            None
        }
    }
}

fn parse(bytes: &[u8], file: &str, rule: Rule, violations: &mut Vec<Violation>) -> Option<Value> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if v.is_object() => Some(v),
        Ok(_) => {
            violations.push(Violation::new(
                rule,
                Some(file.to_owned()),
                "not a JSON object",
            ));
            None
        }
        Err(e) => {
            violations.push(Violation::new(
                rule,
                Some(file.to_owned()),
                format!("not valid JSON: {e}"),
            ));
            None
        }
    }
}

/// Inspects one trial dir of job `job`; `display` is how the dir is shown in reports.
pub fn inspect(job: usize, dir: &Path, display: String) -> TrialFacts {
    let mut violations = Vec::new();
    let mut kept = Kept::default();
    read_tree(dir, "", &display, &mut kept, &mut violations);
    let config_file = format!("{display}/config.json");
    let result_file = format!("{display}/result.json");
    let config = usable(
        &kept.config,
        &config_file,
        Rule::NoTrialOverrides,
        &mut violations,
    )
    .and_then(|b| parse(b, &config_file, Rule::NoTrialOverrides, &mut violations));
    let result = read_result(&kept, &result_file, &display, &mut violations);
    check_overrides(
        [
            (config.as_ref(), &config_file),
            (result.as_ref(), &result_file),
        ],
        &mut violations,
    );
    let mut facts = identify(job, dir, display, config.as_ref(), result.as_ref());
    if let Some(result) = &result {
        judge_result(&mut facts, result, &result_file, &mut violations);
    }
    if facts.reward.is_some_and(|r| r > 0.0) {
        check_rewarded_trajectory(&facts, &kept, dir, &mut violations);
    }
    facts.violations = violations;
    facts
}

/// The trial's result.json parsed (`None`, after saying why, when missing or unusable).
fn read_result(
    kept: &Kept,
    result_file: &str,
    display: &str,
    violations: &mut Vec<Violation>,
) -> Option<Value> {
    match &kept.result {
        Some(Ok(bytes)) => parse(bytes, result_file, Rule::TrialResultsComplete, violations),
        Some(Err(problem)) => {
            violations.push(Violation::new(
                Rule::TrialResultsComplete,
                Some(result_file.to_owned()),
                format!("{problem}; a trial result is a few KB, so this one cannot be trusted"),
            ));
            None
        }
        None => {
            violations.push(Violation::new(
                Rule::TrialResultsComplete,
                Some(display.to_owned()),
                "no result.json: the trial never finished; resume the job to complete it",
            ));
            None
        }
    }
}

/// Anti-tampering: the trial's own config.json (`files[0]`) and the copy inside result.json
/// (`files[1]`, its `config`) both count.
fn check_overrides(files: [(Option<&Value>, &String); 2], violations: &mut Vec<Violation>) {
    let [(config, config_file), (result, result_file)] = files;
    for (value, file, prefix) in [
        (config, config_file, ""),
        (result.and_then(|r| r.get("config")), result_file, "config."),
    ] {
        let Some(value) = value else { continue };
        for problem in overrides(value) {
            violations.push(Violation::new(
                Rule::NoTrialOverrides,
                Some(file.clone()),
                format!("{prefix}{problem}"),
            ));
        }
    }
}

/// What the records say the trial is: its names, task and job.
fn identify(
    job: usize,
    dir: &Path,
    display: String,
    config: Option<&Value>,
    result: Option<&Value>,
) -> TrialFacts {
    let mut facts = TrialFacts {
        job,
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        display,
        task: None,
        task_ref: None,
        reward: None,
        exception_type: None,
        agent: None,
        agent_version: None,
        job_id: None,
        trial_name: String::new(),
        models_called: None,
        isolation: Isolation::NotRecorded,
        agent_toolchain: None,
        violations: Vec::new(),
    };
    facts.trial_name = result
        .and_then(|r| str_at(r, "/trial_name"))
        .or_else(|| config.and_then(|c| str_at(c, "/trial_name")))
        .unwrap_or(&facts.name)
        .to_owned();
    let trial_config = read::trial_config(config, result);
    facts.task = read::task_name(result, trial_config).map(str::to_owned);
    facts.job_id = trial_config
        .and_then(|c| str_at(c, "/job_id"))
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    facts.task_ref = trial_config
        .and_then(|c| str_at(c, "/task/ref"))
        .or_else(|| result.and_then(|r| str_at(r, "/config/task/ref")))
        .or_else(|| result.and_then(|r| str_at(r, "/task_id/ref")))
        .map(str::to_owned);
    facts
}

/// What result.json records: reward, exception, agent, models, isolation; and whether it is
/// complete.
fn judge_result(
    facts: &mut TrialFacts,
    result: &Value,
    result_file: &str,
    violations: &mut Vec<Violation>,
) {
    facts.reward = reward_of(result);
    facts.exception_type = result
        .get("exception_info")
        .filter(|e| !e.is_null())
        .map(|e| {
            e.get("exception_type")
                .and_then(Value::as_str)
                .unwrap_or(tasks::ExceptionType::UNKNOWN_NAME)
                .to_owned()
        });
    facts.agent = agent_identity(result);
    facts.agent_version = str_at(result, "/agent_info/version").map(str::to_owned);
    if facts.agent.is_none() {
        violations.push(Violation::new(
            Rule::AgentConfigMatch,
            Some(result_file.to_owned()),
            "no agent_info (with its name): the trial does not say which agent ran it, so it cannot be attributed",
        ));
    }
    for problem in reward_problems(result) {
        violations.push(Violation::new(
            Rule::RewardsInRange,
            Some(result_file.to_owned()),
            problem,
        ));
    }
    facts.models_called = result
        .pointer("/agent_result/metadata/llm_bridge/models_called")
        .and_then(Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        });
    if result.get("finished_at").is_none_or(Value::is_null) {
        violations.push(Violation::new(
            Rule::TrialResultsComplete,
            Some(result_file.to_owned()),
            "finished_at is missing: the trial never finished; resume the job to complete it",
        ));
    }
    // Judged across trials by `evidence.rs`: whether a missing record fails depends on
    // the verdict asked for.
    facts.isolation = isolation_of(result);
    facts.agent_toolchain = agent_toolchain_used(result);
    if facts.exception_type.is_none() && !has_rewards(result) {
        violations.push(Violation::new(
            Rule::TrialResultsComplete,
            Some(result_file.to_owned()),
            "neither rewards (verifier_result.rewards) nor an exception (exception_info) recorded",
        ));
    }
}

/// A rewarded trial ships a valid ATIF trajectory.
fn check_rewarded_trajectory(
    facts: &TrialFacts,
    kept: &Kept,
    dir: &Path,
    violations: &mut Vec<Violation>,
) {
    let trajectory_file = format!("{}/agent/trajectory.json", facts.display);
    match &kept.trajectory {
        Some(Err(problem)) => violations.push(Violation::new(
            Rule::PassingTrialTrajectories,
            Some(trajectory_file),
            problem.clone(),
        )),
        None => violations.push(Violation::new(
            Rule::PassingTrialTrajectories,
            Some(trajectory_file),
            format!(
                "reward {} but no agent/trajectory.json; rewarded trials must ship their ATIF trajectory",
                facts.reward.unwrap_or_default()
            ),
        )),
        Some(Ok(bytes)) => {
            let errors = tasks::atif::validate_bytes(bytes, &dir.join("agent"));
            for error in errors.iter().take(MAX_ATIF_ERRORS) {
                violations.push(Violation::new(
                    Rule::PassingTrialTrajectories,
                    Some(trajectory_file.clone()),
                    format!("invalid ATIF: {error}"),
                ));
            }
            if errors.len() > MAX_ATIF_ERRORS {
                violations.push(Violation::new(
                    Rule::PassingTrialTrajectories,
                    Some(trajectory_file),
                    format!(
                        "… and {} more ATIF errors (run `runner validate-trajectory` on it)",
                        errors.len() - MAX_ATIF_ERRORS
                    ),
                ));
            }
        }
    }
}
