//! `trajectories_bound`: each trial's `agent/trajectory.json` is its own: its agent and model
//! are the ones its `agent_info` names, its first user message holds the task's instruction
//! (with `--dataset`, which has the instructions), and no other trial of the submission holds
//! the same session (see [`tasks::records::trajectory_binding`]). A trajectory copied into
//! other trials, or another task's, fails here whatever the rewards say.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tasks::records::read;
use tasks::records::trajectory_binding::{
    TRAJECTORY, TrajectoryFacts, binding_problems, read_trajectory, repeated_sessions,
};

use super::Rule;
use super::report::Violation;
use super::trial::TrialFacts;

/// A dataset task's content digest (normalised) and instruction (a multi-step task's first
/// step's).
pub struct TaskInstruction {
    digest: String,
    text: String,
}

/// Each dataset task's instruction by task name.
pub fn instructions(dataset: &tasks::Dataset) -> BTreeMap<String, TaskInstruction> {
    dataset
        .tasks
        .iter()
        .filter_map(|t| {
            let text = if t.instruction.trim().is_empty() {
                t.steps.first()?.instruction.clone()
            } else {
                t.instruction.clone()
            };
            let digest = normalise(&t.digest);
            Some((t.name.clone(), TaskInstruction { digest, text }))
        })
        .collect()
}

/// Harbor's ref normalisation: trimmed, lowercase, without `sha256:`.
fn normalise(reference: &str) -> String {
    let r = reference.trim().to_ascii_lowercase();
    r.strip_prefix("sha256:").unwrap_or(&r).to_owned()
}

/// The instruction the trial `trial` was given, when the dataset has its task at the content
/// it ran (exact name, else the short name when unambiguous); a trial of other content is
/// `correct_task_versions`' to name, and its instruction may differ.
fn instruction_of<'a>(
    instructions: &'a BTreeMap<String, TaskInstruction>,
    trial: &TrialFacts,
) -> Option<&'a str> {
    let name = trial.task.as_deref()?;
    let short = |n: &str| n.rsplit('/').next().unwrap_or(n).to_owned();
    let task = match instructions.get(name) {
        Some(task) => task,
        None => {
            let mut found = instructions.iter().filter(|(k, _)| short(k) == short(name));
            let (_, task) = found.next()?;
            if found.next().is_some() {
                return None;
            }
            task
        }
    };
    (normalise(trial.task_ref.as_deref()?) == task.digest).then_some(task.text.as_str())
}

/// Checks the trajectory of every trial (each counted once: `trials` after `unique_trials`'
/// dedup), `dirs[i]` being job i's dir; `instructions` empty without `--dataset`.
pub fn check(
    dirs: &[PathBuf],
    trials: &[TrialFacts],
    instructions: &BTreeMap<String, TaskInstruction>,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut sessions: Vec<(&str, TrajectoryFacts)> = Vec::new();
    for trial in trials {
        let dir = dirs[trial.job].join(&trial.name);
        let file = Some(format!("{}/{TRAJECTORY}", trial.display));
        let facts = match read_trajectory(&dir) {
            None => continue,
            // Whether it is valid ATIF is passing_trial_trajectories' business.
            Some(Err(_)) => continue,
            Some(Ok(facts)) => facts,
        };
        let result = read::read_json(&dir.join("result.json")).ok().flatten();
        if let Some(result) = &result {
            let instruction = instruction_of(instructions, trial);
            let problems = binding_problems(&facts, result, instruction);
            if !problems.is_empty() {
                violations.push(Violation::new(
                    Rule::TrajectoriesBound,
                    file,
                    format!(
                        "trial {}: the trajectory is not this trial's: {}",
                        trial.name,
                        problems.join("; ")
                    ),
                ));
            }
        }
        sessions.push((&trial.display, facts));
    }
    for (session, labels) in repeated_sessions(sessions.iter().map(|(l, f)| (*l, f))) {
        violations.push(Violation::new(
            Rule::TrajectoriesBound,
            Some(format!("{}/{TRAJECTORY}", labels[0])),
            format!(
                "the same session {session:?} is the trajectory of {} trials: {}; session ids are unique across a submission (each trial's trajectory is its own run)",
                labels.len(),
                labels.join(", ")
            ),
        ));
    }
    violations
}
