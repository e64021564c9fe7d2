//! Whether two job dirs are parts of one plan: the same agent and its config, model, dataset
//! digest, task digests, k, multipliers and limits. Each difference is named by its field,
//! with the value in each job.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tasks::records::TrialLimits;

use super::parts::Part;
use crate::job::identity::json_differences;
use crate::job::resume::defining;

/// What differs between `a` and `b`, one line per field (empty: the same plan).
pub fn plan_differences(a: &Part, b: &Part) -> Vec<String> {
    let mut out: Vec<String> =
        json_differences("config", &defining(&a.config), &defining(&b.config))
            .into_iter()
            .map(|(path, x, y)| {
                format!("{}: {x} in A, {y} in B", path.trim_start_matches("config."))
            })
            .collect();
    if a.config.n_attempts != b.config.n_attempts {
        out.push(format!(
            "k (n_attempts): {} in A, {} in B",
            a.config.n_attempts, b.config.n_attempts
        ));
    }
    if let (Some(x), Some(y)) = (a.config.n_shards, b.config.n_shards)
        && x != y
    {
        out.push(format!(
            "n_shards: the plan split in {x} in A, in {y} in B (merge the shards of one split)"
        ));
    }
    if a.lock.dataset_digest != b.lock.dataset_digest {
        out.push(format!(
            "dataset digest: {} in A, {} in B (other tasks, other task content, or another -i/-x/-l selection)",
            a.lock.dataset_digest.as_deref().unwrap_or("none"),
            b.lock.dataset_digest.as_deref().unwrap_or("none")
        ));
    }
    let digests = |p: &Part| -> BTreeMap<String, String> {
        p.lock
            .trials
            .iter()
            .map(|t| (t.task.name.clone(), t.task.digest.clone()))
            .collect()
    };
    let (da, db) = (digests(a), digests(b));
    for (task, x) in &da {
        if let Some(y) = db.get(task)
            && x != y
        {
            out.push(format!("task {task}: content digest {x} in A, {y} in B"));
        }
    }
    out.extend(limit_differences(a, b));
    out
}

/// The limits trials ran under: the job-wide caps (downloads, trial.log) over every trial,
/// and all of a task's limits where both jobs ran that task.
fn limit_differences(a: &Part, b: &Part) -> Vec<String> {
    // By the task's name in the lock: a task's path differs from machine to machine.
    let limits = |p: &Part| -> BTreeMap<String, TrialLimits> {
        let task_of: BTreeMap<&str, &str> = p
            .lock
            .trials
            .iter()
            .map(|t| (t.trial_name.as_str(), t.task.name.as_str()))
            .collect();
        p.trials
            .iter()
            .filter_map(|(name, t)| {
                let task = task_of.get(name.as_str())?;
                Some(((*task).to_owned(), t.config.as_ref()?.limits.clone()?))
            })
            .collect()
    };
    let (la, lb) = (limits(a), limits(b));
    let caps = |l: &BTreeMap<String, TrialLimits>| {
        l.values()
            .next()
            .map(|x| json!({"download_cap_bytes": x.download_cap_bytes, "trial_log_cap_bytes": x.trial_log_cap_bytes}))
    };
    let mut out = Vec::new();
    if let (Some(x), Some(y)) = (caps(&la), caps(&lb)) {
        push(&mut out, "limits", &x, &y);
    }
    for (task, x) in &la {
        if let Some(y) = lb.get(task) {
            let (x, y) = (without_enforcement(x), without_enforcement(y));
            push(&mut out, &format!("task {task}: limits"), &x, &y);
        }
    }
    out.dedup();
    out
}

fn push(out: &mut Vec<String>, prefix: &str, x: &Value, y: &Value) {
    out.extend(
        json_differences(prefix, x, y)
            .into_iter()
            .map(|(path, x, y)| format!("{path}: {x} in A, {y} in B")),
    );
}

/// How storage was enforced depends on the machine's engine, not on the plan.
fn without_enforcement(limits: &TrialLimits) -> Value {
    let mut value = json!(limits);
    if let Some(map) = value.as_object_mut() {
        map.remove("storage_enforcement");
    }
    value
}
