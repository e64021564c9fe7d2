//! `trajectories_bound`: each trial's `agent/trajectory.json` is its own: its agent and model
//! are the ones its `agent_info` names, its first user message holds the task's instruction
//! (with `--dataset`, which has the instructions), and no other trial of the submission holds
//! the same session (see [`tasks::records::trajectory_binding`]). A trajectory copied into
//! other trials, or another task's, fails here whatever the rewards say.

use std::collections::BTreeMap;
use std::path::Path;

use tasks::records::read;
use tasks::records::trajectory_binding::{
    TRAJECTORY, TrajectoryFacts, binding_problems, read_trajectory, repeated_sessions,
};

use super::Rule;
use super::job::Job;
use super::report::Violation;

/// Each dataset task's instruction by task name (a multi-step task's first step's).
pub fn instructions(dataset: &tasks::Dataset) -> BTreeMap<String, String> {
    dataset
        .tasks
        .iter()
        .filter_map(|t| {
            let text = if t.instruction.trim().is_empty() {
                t.steps.first()?.instruction.clone()
            } else {
                t.instruction.clone()
            };
            Some((t.name.clone(), text))
        })
        .collect()
}

/// The instruction of the task `name` (exact, else by its short name when unambiguous).
fn instruction_of<'a>(instructions: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    if let Some(text) = instructions.get(name) {
        return Some(text);
    }
    let short = |n: &str| n.rsplit('/').next().unwrap_or(n).to_owned();
    let mut found = instructions.iter().filter(|(k, _)| short(k) == short(name));
    let (_, text) = found.next()?;
    found.next().is_none().then_some(text.as_str())
}

/// Checks every trial's trajectory of `jobs`; `instructions` empty without `--dataset`.
pub fn check(jobs: &[Job], instructions: &BTreeMap<String, String>) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut sessions: Vec<(String, TrajectoryFacts)> = Vec::new();
    let trials = jobs
        .iter()
        .flat_map(|j| j.trial_dirs.iter().map(move |d| (j, d)));
    for (job, dir) in trials {
        let label = format!("{}/{}", job.display, name_of(dir));
        let file = Some(format!("{label}/{TRAJECTORY}"));
        let facts = match read_trajectory(dir) {
            None => continue,
            // Whether it is valid ATIF is passing_trial_trajectories' business.
            Some(Err(_)) => continue,
            Some(Ok(facts)) => facts,
        };
        let result = read::read_json(&dir.join("result.json")).ok().flatten();
        if let Some(result) = &result {
            let config = read::trial_config(None, Some(result));
            let instruction = read::task_name(Some(result), config)
                .and_then(|task| instruction_of(instructions, task));
            let problems = binding_problems(&facts, result, instruction);
            if !problems.is_empty() {
                violations.push(Violation::new(
                    Rule::TrajectoriesBound,
                    file,
                    format!(
                        "trial {}: the trajectory is not this trial's: {}",
                        name_of(dir),
                        problems.join("; ")
                    ),
                ));
            }
        }
        sessions.push((label, facts));
    }
    for (session, labels) in repeated_sessions(sessions.iter().map(|(l, f)| (l.as_str(), f))) {
        violations.push(Violation::new(
            Rule::TrajectoriesBound,
            Some(format!("{}/{TRAJECTORY}", labels[0])),
            format!(
                "the same session {session:?} (same steps) is the trajectory of {} trials: {}; each trial's trajectory is its own run",
                labels.len(),
                labels.join(", ")
            ),
        ));
    }
    violations
}

fn name_of(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
