//! Two jobs compared task by task: the difference in mean reward with its interval, a paired
//! sign-flip test, per-task outcomes and flipped tasks.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::EXACT_SIGN_FLIP_MAX;
use crate::bootstrap::{Interval, Resampling, percentile_interval, replicates};

/// How [`Comparison::ci`] is computed.
pub const DIFFERENCE_METHOD: &str = "paired bootstrap over tasks, percentile";

/// The paired test of [`Comparison::test`].
pub const TEST_METHOD: &str = "two-sided sign-flip permutation test on per-task differences";

/// Per-task means closer than this are a tie (rewards are sums of a few floats).
const TIE_TOLERANCE: f64 = 1e-9;

/// Which job did better on one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedOutcome {
    /// Job A's mean reward on the task is higher.
    ABetter,
    /// Job B's mean reward on the task is higher.
    BBetter,
    /// Equal means.
    Tie,
}

/// One task run in both jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskPair {
    /// Task name.
    pub task: String,
    /// Trials in job A.
    pub trials_a: usize,
    /// Trials in job B.
    pub trials_b: usize,
    /// Mean reward in job A (missing rewards as 0).
    pub mean_a: f64,
    /// Mean reward in job B.
    pub mean_b: f64,
    /// Some trial of job A had reward > 0.
    pub solved_a: bool,
    /// Some trial of job B had reward > 0.
    pub solved_b: bool,
    /// Which job did better.
    pub outcome: PairedOutcome,
}

/// The sign-flip test's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SignFlipTest {
    /// Two-sided p-value of "the jobs do equally well".
    pub p_value: f64,
    /// True when all 2^m sign patterns were enumerated.
    pub exact: bool,
    /// Sign patterns evaluated (2^m, or the random draws).
    pub patterns: usize,
    /// Tasks with a non-zero difference (m); ties carry no sign information.
    pub nonzero_differences: usize,
    /// [`TEST_METHOD`].
    pub method: &'static str,
}

/// Job B against job A, paired by task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Tasks run in both jobs.
    pub paired_tasks: usize,
    /// Tasks only job A ran (left out of every figure below).
    pub only_in_a: Vec<String>,
    /// Tasks only job B ran.
    pub only_in_b: Vec<String>,
    /// Job A's mean over paired tasks, every task weighing the same.
    pub mean_a: f64,
    /// Job B's mean over paired tasks.
    pub mean_b: f64,
    /// `mean_b − mean_a`: positive when B did better.
    pub difference: f64,
    /// 95% interval of the difference; `None` with fewer than two paired tasks.
    pub ci: Option<Interval>,
    /// [`DIFFERENCE_METHOD`].
    pub interval_method: &'static str,
    /// The paired test; `None` without paired tasks.
    pub test: Option<SignFlipTest>,
    /// Tasks where A did better.
    pub a_better: usize,
    /// Tasks where B did better.
    pub b_better: usize,
    /// Tasks with equal means.
    pub ties: usize,
    /// Solved in some trial of A and in no trial of B.
    pub solved_only_by_a: Vec<String>,
    /// Solved in some trial of B and in no trial of A.
    pub solved_only_by_b: Vec<String>,
    /// Every paired task, by name.
    pub tasks: Vec<TaskPair>,
    /// The resampling behind the interval and a non-exact test.
    pub resampling: Resampling,
}

fn mean(rewards: &[Option<f64>]) -> f64 {
    rewards.iter().map(|r| r.unwrap_or(0.0)).sum::<f64>() / rewards.len() as f64
}

fn solved(rewards: &[Option<f64>]) -> bool {
    rewards.iter().any(|r| r.is_some_and(|v| v > 0.0))
}

/// Compares job B with job A (task name → that task's trial rewards). Tasks with no trials
/// count as not run.
pub fn compare(
    a: &BTreeMap<String, Vec<Option<f64>>>,
    b: &BTreeMap<String, Vec<Option<f64>>>,
    resampling: &Resampling,
) -> Comparison {
    let ran = |m: &BTreeMap<String, Vec<Option<f64>>>, task: &str| {
        m.get(task).is_some_and(|t| !t.is_empty())
    };
    let only = |x: &BTreeMap<String, Vec<Option<f64>>>, y| -> Vec<String> {
        x.iter()
            .filter(|(task, trials)| !trials.is_empty() && !ran(y, task))
            .map(|(task, _)| task.clone())
            .collect()
    };
    let mut tasks = Vec::new();
    for (task, trials_a) in a {
        let Some(trials_b) = b.get(task).filter(|t| !t.is_empty()) else {
            continue;
        };
        if trials_a.is_empty() {
            continue;
        }
        let (mean_a, mean_b) = (mean(trials_a), mean(trials_b));
        let outcome = if (mean_b - mean_a).abs() <= TIE_TOLERANCE {
            PairedOutcome::Tie
        } else if mean_b > mean_a {
            PairedOutcome::BBetter
        } else {
            PairedOutcome::ABetter
        };
        tasks.push(TaskPair {
            task: task.clone(),
            trials_a: trials_a.len(),
            trials_b: trials_b.len(),
            mean_a,
            mean_b,
            solved_a: solved(trials_a),
            solved_b: solved(trials_b),
            outcome,
        });
    }
    let g = tasks.len();
    let diffs: Vec<f64> = tasks.iter().map(|t| t.mean_b - t.mean_a).collect();
    let average = |xs: &mut dyn Iterator<Item = f64>| {
        if g == 0 {
            0.0
        } else {
            xs.sum::<f64>() / g as f64
        }
    };
    let mean_a = average(&mut tasks.iter().map(|t| t.mean_a));
    let mean_b = average(&mut tasks.iter().map(|t| t.mean_b));
    let ci = (g >= 2).then(|| {
        let mut reps = replicates(g, resampling, 1, |drawn, out| {
            out[0] = drawn.iter().map(|&i| diffs[i]).sum::<f64>() / drawn.len() as f64;
        })
        .remove(0);
        percentile_interval(&mut reps)
    });
    let count = |o: PairedOutcome| tasks.iter().filter(|t| t.outcome == o).count();
    let flipped = |pick: fn(&TaskPair) -> bool| {
        tasks
            .iter()
            .filter(|t| pick(t))
            .map(|t| t.task.clone())
            .collect()
    };
    Comparison {
        paired_tasks: g,
        only_in_a: only(a, b),
        only_in_b: only(b, a),
        mean_a,
        mean_b,
        difference: mean_b - mean_a,
        ci,
        interval_method: DIFFERENCE_METHOD,
        test: (g > 0).then(|| sign_flip_test(&diffs, resampling)),
        a_better: count(PairedOutcome::ABetter),
        b_better: count(PairedOutcome::BBetter),
        ties: count(PairedOutcome::Tie),
        solved_only_by_a: flipped(|t| t.solved_a && !t.solved_b),
        solved_only_by_b: flipped(|t| t.solved_b && !t.solved_a),
        tasks,
        resampling: *resampling,
    }
}

/// The two-sided sign-flip test of `Σ d = 0`: the share of sign patterns whose `|Σ ±d|` is at
/// least the observed `|Σ d|`.
pub(crate) fn sign_flip_test(diffs: &[f64], resampling: &Resampling) -> SignFlipTest {
    let nonzero: Vec<f64> = diffs
        .iter()
        .copied()
        .filter(|d| d.abs() > TIE_TOLERANCE)
        .collect();
    let m = nonzero.len();
    let observed = nonzero.iter().sum::<f64>().abs();
    // Sums of the same floats in another order differ in the last bits.
    let at_least = |s: f64| s.abs() >= observed - 1e-9;
    if m <= EXACT_SIGN_FLIP_MAX {
        let patterns = 1usize << m;
        let hits = (0..patterns)
            .filter(|mask| {
                let s: f64 = nonzero
                    .iter()
                    .enumerate()
                    .map(|(i, d)| if mask >> i & 1 == 1 { -d } else { *d })
                    .sum();
                at_least(s)
            })
            .count();
        return SignFlipTest {
            p_value: hits as f64 / patterns as f64,
            exact: true,
            patterns,
            nonzero_differences: m,
            method: TEST_METHOD,
        };
    }
    let mut rng = fastrand::Rng::with_seed(resampling.seed);
    let draws = resampling.permutations;
    let hits = (0..draws)
        .filter(|_| {
            let s: f64 = nonzero
                .iter()
                .map(|d| if rng.bool() { -d } else { *d })
                .sum();
            at_least(s)
        })
        .count();
    SignFlipTest {
        // The observed pattern counts as one draw, so p is never 0 (Phipson & Smyth 2010).
        p_value: (1 + hits) as f64 / (1 + draws) as f64,
        exact: false,
        patterns: draws,
        nonzero_differences: m,
        method: TEST_METHOD,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::float_eq::close;

    fn job(tasks: &[(&str, &[f64])]) -> BTreeMap<String, Vec<Option<f64>>> {
        tasks
            .iter()
            .map(|(name, rewards)| (name.to_string(), rewards.iter().map(|r| Some(*r)).collect()))
            .collect()
    }

    #[test]
    fn exact_sign_flip_p_value_by_hand() {
        // d = (1, 2, 3): observed |Σ| = 6. The 8 patterns give |Σ| ∈ {6, 0, 2, 4, 4, 2, 0, 6}:
        // two reach 6, so p = 2/8.
        let t = sign_flip_test(&[1.0, 2.0, 3.0], &Resampling::default());
        assert!(t.exact);
        assert_eq!((t.patterns, t.nonzero_differences), (8, 3));
        assert!(close(t.p_value, 0.25));
        // d = (1, 1, 1, 1, 1): only all-plus and all-minus reach 5 → 2/32.
        let t = sign_flip_test(&[1.0; 5], &Resampling::default());
        assert!(close(t.p_value, 2.0 / 32.0));
        // Zeros carry no sign: (0, 0, 1) is the one-task case, p = 1.
        let t = sign_flip_test(&[0.0, 0.0, 1.0], &Resampling::default());
        assert_eq!(t.nonzero_differences, 1);
        assert!(close(t.p_value, 1.0));
        assert!(close(
            sign_flip_test(&[0.0], &Resampling::default()).p_value,
            1.0
        ));
    }

    #[test]
    fn random_sign_flips_beyond_the_exact_limit() {
        // 20 tasks all +1: the exact p is 2/2^20 ≈ 1.9e-6; with 10 000 draws the estimate
        // is (1 + hits)/10 001 with hits almost surely 0.
        let t = sign_flip_test(&[1.0; 20], &Resampling::default());
        assert!(!t.exact);
        assert_eq!(t.patterns, 10_000);
        assert!(t.p_value <= 3.0 / 10_001.0, "{t:?}");
        // Alternating ±1: observed sum 0, every pattern reaches it.
        let d: Vec<f64> = (0..20)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!(close(
            sign_flip_test(&d, &Resampling::default()).p_value,
            1.0
        ));
    }

    #[test]
    fn compare_by_hand() {
        let a = job(&[
            ("t1", &[1.0, 0.0]),
            ("t2", &[0.0, 0.0]),
            ("t3", &[1.0, 1.0]),
            ("only-a", &[1.0]),
        ]);
        let b = job(&[
            ("t1", &[1.0, 1.0, 1.0]),
            ("t2", &[0.0, 1.0]),
            ("t3", &[0.0, 0.0]),
            ("only-b", &[0.0]),
        ]);
        let c = compare(&a, &b, &Resampling::default());
        assert_eq!(c.paired_tasks, 3);
        assert_eq!(
            (c.only_in_a.as_slice(), c.only_in_b.as_slice()),
            (&["only-a".to_owned()][..], &["only-b".to_owned()][..])
        );
        // Per task: A (0.5, 0, 1), B (1, 0.5, 0) → d = (0.5, 0.5, −1), mean 0.
        assert!(close(c.mean_a, 0.5));
        assert!(close(c.mean_b, 0.5));
        assert!(close(c.difference, 0.0));
        assert_eq!((c.a_better, c.b_better, c.ties), (1, 2, 0));
        assert_eq!(c.solved_only_by_b, ["t2"]);
        assert_eq!(c.solved_only_by_a, ["t3"]);
        let test = c.test.unwrap();
        // |Σ| = 0 is reached by every pattern.
        assert!(close(test.p_value, 1.0));
        let ci = c.ci.unwrap();
        assert!(ci.low < 0.0 && ci.high > 0.0, "{ci:?}");
        assert_eq!(c.tasks[1].outcome, PairedOutcome::BBetter);
        assert_eq!(c.tasks[2].outcome, PairedOutcome::ABetter);
    }

    #[test]
    fn a_job_against_itself_is_all_ties() {
        let a = job(&[("t1", &[1.0, 0.0]), ("t2", &[0.0, 0.5])]);
        let c = compare(&a, &a, &Resampling::default());
        assert_eq!((c.a_better, c.b_better, c.ties), (0, 0, 2));
        assert_eq!(c.difference, 0.0);
        assert_eq!(
            c.ci,
            Some(Interval {
                low: 0.0,
                high: 0.0
            })
        );
        assert_eq!(c.test.unwrap().p_value, 1.0);
        assert!(c.solved_only_by_a.is_empty() && c.solved_only_by_b.is_empty());
    }

    #[test]
    fn no_paired_tasks() {
        let a = job(&[("t1", &[1.0])]);
        let b = job(&[("t2", &[1.0]), ("empty", &[])]);
        let c = compare(&a, &b, &Resampling::default());
        assert_eq!(c.paired_tasks, 0);
        assert_eq!((c.ci, c.test), (None, None));
        assert_eq!(c.only_in_b, ["t2"]);
    }
}
