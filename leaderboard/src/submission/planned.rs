//! `unique_trials` and `planned_trials`: a trial counts once whatever paths point at it, and
//! the trials present are matched against what each job planned.
//!
//! A trial is identified by its content, not its path: the job id it records
//! (`config.job_id`, else its job's `result.json` id) and its trial name. So a job dir given
//! twice, or a copy of it beside it, adds nothing: the copies are named and counted once. The
//! plan is `lock.json`'s `trials`: runner's entries name each trial, Harbor's give one entry
//! per planned trial of a task, so a job's trials are matched by name or by count per task.
//! A trial a job planned and nobody submitted (a cherry-picked job) is named as missing.
//! A job `runner merge` made lists the ids of its parts (`merged_from`): their trials count
//! against the merged job's plan, and still dedupe against the parts' own copies.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::Rule;
use super::job::Job;
use super::report::Violation;
use super::trial::TrialFacts;

/// At most this many trial names are listed in one violation; the rest are counted.
const MAX_LISTED: usize = 10;

/// What a job's `lock.json` planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// runner's lock: every planned trial by name.
    Named(BTreeSet<String>),
    /// Harbor's lock: planned trials counted per task name.
    Counted(BTreeMap<String, usize>),
}

impl Plan {
    /// The plan of a parsed `lock.json`.
    pub fn of_lock(lock: &Value) -> Plan {
        let trials = lock
            .get("trials")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let names: Option<BTreeSet<String>> = trials
            .iter()
            .map(|t| t.get("trial_name")?.as_str().map(str::to_owned))
            .collect();
        match names {
            Some(names) if !trials.is_empty() => Plan::Named(names),
            _ => {
                let mut counts = BTreeMap::new();
                for trial in trials {
                    let task = trial
                        .pointer("/task/name")
                        .and_then(Value::as_str)
                        .unwrap_or("(unnamed task)");
                    *counts.entry(task.to_owned()).or_default() += 1;
                }
                Plan::Counted(counts)
            }
        }
    }
}

/// The id of the job a trial belongs to: the one it records, else its job dir's.
fn job_key(trial: &TrialFacts, jobs: &[Job]) -> String {
    trial
        .job_id
        .clone()
        .or_else(|| jobs[trial.job].id.clone())
        .unwrap_or_else(|| jobs[trial.job].display.clone())
}

/// The job a trial counts for in the plan check: its job dir's (by id) when the trial
/// records that id or one of the jobs the dir was merged from, else the job it records.
fn plan_key(trial: &TrialFacts, jobs: &[Job]) -> String {
    let job = &jobs[trial.job];
    match (&trial.job_id, &job.id) {
        (Some(recorded), Some(dir_id)) if job.merged_from.contains(recorded) => dir_id.clone(),
        _ => job_key(trial, jobs),
    }
}

/// Removes every trial given more than once (the first stays) and returns the violations
/// of `unique_trials`, one per duplicated trial.
pub fn dedup(trials: &mut Vec<TrialFacts>, jobs: &[Job]) -> Vec<Violation> {
    let mut first: HashMap<(String, String), usize> = HashMap::new();
    let mut copies: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut keep = Vec::with_capacity(trials.len());
    for (i, trial) in trials.iter().enumerate() {
        let key = (job_key(trial, jobs), trial.trial_name.clone());
        match first.get(&key) {
            Some(&original) => {
                copies
                    .entry(original)
                    .or_default()
                    .push(trial.display.clone());
                keep.push(false);
            }
            None => {
                first.insert(key, i);
                keep.push(true);
            }
        }
    }
    let violations = copies
        .into_iter()
        .map(|(original, others)| {
            let trial = &trials[original];
            Violation::new(
                Rule::UniqueTrials,
                Some(format!("{}/result.json", others[0])),
                format!(
                    "trial {} of job {} is given {} times ({} and {}): a trial counts once, so the copies add \
                     nothing; submit each job dir once",
                    trial.trial_name,
                    job_key(trial, jobs),
                    others.len() + 1,
                    trial.display,
                    others.join(", ")
                ),
            )
        })
        .collect();
    let mut index = 0;
    trials.retain(|_| {
        index += 1;
        keep[index - 1]
    });
    violations
}

/// Violations of `planned_trials`: per job (by id, once however many dirs hold it), the
/// planned trials no dir holds, the trials it did not plan, and trials that record another
/// job's id than their job dir's.
pub fn check(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut by_job: BTreeMap<String, Vec<&TrialFacts>> = BTreeMap::new();
    for trial in trials {
        let key = plan_key(trial, jobs);
        if let (Some(recorded), Some(dir_id)) = (&trial.job_id, &jobs[trial.job].id)
            && recorded != dir_id
            && !jobs[trial.job].merged_from.contains(recorded)
        {
            violations.push(Violation::new(
                Rule::PlannedTrials,
                Some(format!("{}/config.json", trial.display)),
                format!(
                    "trial {} records job id {recorded}, but it sits in job dir {} whose id is {dir_id}: a trial \
                     moved in from another job is not part of this job's plan",
                    trial.trial_name, jobs[trial.job].display
                ),
            ));
        }
        by_job.entry(key).or_default().push(trial);
    }
    let mut checked = BTreeSet::new();
    for (index, job) in jobs.iter().enumerate() {
        let key = job
            .id
            .clone()
            .or_else(|| {
                trials
                    .iter()
                    .find(|t| t.job == index)
                    .map(|t| plan_key(t, jobs))
            })
            .unwrap_or_else(|| job.display.clone());
        if !checked.insert(key.clone()) {
            continue;
        }
        let present = by_job.get(&key).map(Vec::as_slice).unwrap_or_default();
        let lock_file = Some(format!("{}/lock.json", job.display));
        match &job.plan {
            None => violations.push(Violation::new(
                Rule::PlannedTrials,
                lock_file,
                "no readable lock.json: the job's planned trials are unknown, so trials left out of the \
                 submission cannot be found; submit the job dir whole, as the runner (or Harbor) wrote it",
            )),
            Some(Plan::Named(planned)) => {
                let names: BTreeSet<&str> = present.iter().map(|t| t.trial_name.as_str()).collect();
                let missing: Vec<&str> = planned
                    .iter()
                    .map(String::as_str)
                    .filter(|n| !names.contains(n))
                    .collect();
                if !missing.is_empty() {
                    violations.push(Violation::new(
                        Rule::PlannedTrials,
                        lock_file.clone(),
                        format!(
                            "{} of the {} trials lock.json planned are not in the submission: {}; submit every \
                             trial of the job (resume it to finish the missing ones)",
                            missing.len(),
                            planned.len(),
                            listed(&missing)
                        ),
                    ));
                }
                let extra: Vec<&str> = names
                    .iter()
                    .copied()
                    .filter(|n| !planned.contains(*n))
                    .collect();
                if !extra.is_empty() {
                    violations.push(Violation::new(
                        Rule::PlannedTrials,
                        lock_file,
                        format!(
                            "{} trial(s) of this job are not in its lock.json plan: {}",
                            extra.len(),
                            listed(&extra)
                        ),
                    ));
                }
            }
            Some(Plan::Counted(planned)) => {
                let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                for trial in present {
                    let task = trial.task.as_deref().unwrap_or("(unnamed task)");
                    let name = planned
                        .keys()
                        .find(|p| same_task(p, task))
                        .map_or(task, String::as_str);
                    *counts.entry(name).or_default() += 1;
                }
                let tasks: BTreeSet<&str> = planned
                    .keys()
                    .map(String::as_str)
                    .chain(counts.keys().copied())
                    .collect();
                for task in tasks {
                    let want = planned.get(task).copied().unwrap_or(0);
                    let have = counts.get(task).copied().unwrap_or(0);
                    if want != have {
                        violations.push(Violation::new(
                            Rule::PlannedTrials,
                            lock_file.clone(),
                            format!(
                                "task {task}: lock.json planned {want} trial(s), the submission holds {have}; \
                                 submit every trial of the job and no other"
                            ),
                        ));
                    }
                }
            }
        }
    }
    violations
}

/// The trials the submission's jobs planned, each job (by id) once: its `lock.json` plan, or
/// its trials present without one; never fewer than the trials present.
pub fn planned_count(jobs: &[Job], trials: &[TrialFacts]) -> usize {
    let mut seen = BTreeSet::new();
    let mut total = 0;
    for (i, job) in jobs.iter().enumerate() {
        if !seen.insert(job.id.clone().unwrap_or_else(|| job.display.clone())) {
            continue;
        }
        total += match &job.plan {
            Some(Plan::Named(names)) => names.len(),
            Some(Plan::Counted(counts)) => counts.values().sum(),
            None => trials.iter().filter(|t| t.job == i).count(),
        };
    }
    total.max(trials.len())
}

/// Task names match whole, or by the part after `/` (`org/name` against `name`).
fn same_task(a: &str, b: &str) -> bool {
    a == b || a.rsplit('/').next() == b.rsplit('/').next()
}

fn listed(names: &[&str]) -> String {
    let shown = names
        .iter()
        .take(MAX_LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(MAX_LISTED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}
