//! Shards: the I-th of N disjoint parts of a job's plan (`runner run --shard I/N`), so one
//! job can run on several machines and be merged back (`runner merge`).
//!
//! The split is by task (all k trials of a task in one shard, so per-task pass@k and the
//! task-clustered intervals of the merged job are exact), deterministic (it depends only on
//! the tasks' names, digests and agent timeouts, never on the machine, the order files were
//! listed in or a random seed) and balanced by each task's agent timeout, the bound of its
//! trials' length, so shards finish near together: a greedy longest-processing-time
//! assignment. The whole job is planned first and the shard keeps its part of that plan,
//! so its trials have exactly the names they have in the unsharded job.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use tasks::Task;

use super::plan::JobPlan;

/// One part of a plan split in `count`: `index` from 1 to `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which part, from 1.
    pub index: u32,
    /// How many parts.
    pub count: u32,
}

/// Why a `--shard` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not two whole numbers separated by `/`.
    #[error("{0:?} is not I/N (two whole numbers, e.g. 2/3 for the second of three shards)")]
    Syntax(String),
    /// I outside 1..=N, or N zero.
    #[error("{0:?}: the shard I of I/N must be from 1 to N (e.g. 1/3, 2/3, 3/3)")]
    Range(String),
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(text.to_owned());
        let (i, n) = text.trim().split_once('/').ok_or_else(syntax)?;
        let number = |s: &str| -> Result<u32, ShardError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            s.parse().map_err(|_| syntax())
        };
        let (index, count) = (number(i)?, number(n)?);
        if count == 0 || index == 0 || index > count {
            return Err(ShardError::Range(text.to_owned()));
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A task as the split sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskWeight {
    /// The task's name (unique in a dataset).
    pub name: String,
    /// Its content digest (breaks ties between equal names, which a dataset never has).
    pub digest: String,
    /// Its agent time in seconds (`None`: no deadline).
    pub seconds: Option<f64>,
}

impl TaskWeight {
    /// The weight of `task`: its agent timeout, summed over its steps for a multi-step task
    /// (a step without its own deadline has the task's).
    pub fn of(task: &Task) -> TaskWeight {
        let base = task.config.agent.timeout_sec;
        let seconds = if task.config.steps.is_empty() {
            base
        } else {
            task.config
                .steps
                .iter()
                .map(|s| s.agent.timeout_sec.or(base))
                .sum::<Option<f64>>()
        };
        TaskWeight {
            name: task.name.clone(),
            digest: task.digest.clone(),
            seconds,
        }
    }
}

/// The shard (from 1) of each task of `tasks`, in their order: longest first, each to the
/// shard with the least time so far (the lowest-numbered among equals). Ties between tasks of
/// equal time go by name, then digest, so the input's order never matters. A task without a
/// deadline weighs as the longest task that has one (1 s when none has).
pub fn assign(tasks: &[TaskWeight], count: u32) -> Vec<u32> {
    let count = count.max(1) as usize;
    let longest = tasks
        .iter()
        .filter_map(|t| t.seconds)
        .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))))
        .unwrap_or(1.0);
    let weight = |t: &TaskWeight| t.seconds.unwrap_or(longest).max(0.0);
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by(|&a, &b| {
        let (ta, tb) = (&tasks[a], &tasks[b]);
        weight(tb)
            .total_cmp(&weight(ta))
            .then_with(|| ta.name.cmp(&tb.name))
            .then_with(|| ta.digest.cmp(&tb.digest))
    });
    let mut load = vec![0.0f64; count];
    let mut out = vec![0u32; tasks.len()];
    for i in order {
        let (shard, _) = load
            .iter()
            .enumerate()
            .min_by(|(a, la), (b, lb)| la.total_cmp(lb).then(a.cmp(b)))
            .expect("at least one shard");
        load[shard] += weight(&tasks[i]);
        out[i] = shard as u32 + 1;
    }
    out
}

/// Keeps of `plan` (a whole job's, just planned) only the trials of `shard`'s tasks, and
/// records the shard in its config. The lock keeps the whole dataset's digest, so the
/// shards of one plan can be recognised as such when merged.
pub fn select_shard(plan: &mut JobPlan, shard: Shard) {
    let tasks = plan.tasks();
    let weights: Vec<TaskWeight> = tasks.iter().map(|t| TaskWeight::of(t)).collect();
    let assigned = assign(&weights, shard.count);
    let kept: HashSet<&str> = weights
        .iter()
        .zip(&assigned)
        .filter(|(_, s)| **s == shard.index)
        .map(|(w, _)| w.name.as_str())
        .collect();
    plan.trials
        .retain(|t| kept.contains(t.task().name.as_str()));
    plan.lock
        .trials
        .retain(|t| kept.contains(t.task.name.as_str()));
    plan.planned = plan.trials.len();
    plan.config.shard = Some(shard.index);
    plan.config.n_shards = Some(shard.count);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(name: &str, seconds: Option<f64>) -> TaskWeight {
        TaskWeight {
            name: name.into(),
            digest: format!("sha256:{name}"),
            seconds,
        }
    }

    #[test]
    fn values_are_i_of_n_from_one() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!("3/3".parse::<Shard>().unwrap().to_string(), "3/3");
        for bad in ["0/3", "4/3", "1/0", "0/0"] {
            assert!(
                matches!(bad.parse::<Shard>(), Err(ShardError::Range(_))),
                "{bad}"
            );
        }
        for bad in ["x", "1", "1/", "/3", "-1/3", "1/3/4", "a/b", "+1/3", ""] {
            assert!(
                matches!(bad.parse::<Shard>(), Err(ShardError::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_split_is_the_longest_first_greedy_one_and_ignores_input_order() {
        let tasks = vec![
            w("a", Some(60.0)),
            w("b", Some(600.0)),
            w("c", Some(300.0)),
            w("d", Some(300.0)),
            w("e", Some(60.0)),
        ];
        // b → 1 (600); c → 2 (300); d → 3 (300); a → 2 (360); e → 3 (360).
        assert_eq!(assign(&tasks, 3), vec![2, 1, 2, 3, 3]);
        let mut reversed = tasks.clone();
        reversed.reverse();
        let mut again = assign(&reversed, 3);
        again.reverse();
        assert_eq!(again, vec![2, 1, 2, 3, 3]);
        // One shard takes everything; more shards than tasks leave some empty.
        assert_eq!(assign(&tasks, 1), vec![1; 5]);
        let many = assign(&tasks, 8);
        let distinct: HashSet<u32> = many.iter().copied().collect();
        assert_eq!(distinct.len(), 5);
    }

    #[test]
    fn a_task_without_a_deadline_weighs_as_the_longest() {
        let tasks = vec![w("a", None), w("b", Some(100.0)), w("c", Some(50.0))];
        // a and b weigh 100 each: a (by name) → 1, b → 2, c → 1 or 2 (equal): 1.
        assert_eq!(assign(&tasks, 2), vec![1, 2, 1]);
        assert_eq!(assign(&[w("x", None), w("y", None)], 2), vec![1, 2]);
    }
}
