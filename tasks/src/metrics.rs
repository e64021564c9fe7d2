//! Pure metric functions over trial rewards, shared by the job result (`runner run`) and by
//! submission validation so both report the same numbers.
//!
//! A reward is `Option<f64>`: `None` is a trial without a reward (errored or unscored), which
//! every metric here counts as 0, as Harbor and the leaderboards do.
//!
//! The per-task pass@k formula comes from the `stats` crate (which also computes the
//! task-clustered intervals), so the whole workspace uses one formula.

pub use stats::{pass_at_k_estimate, pass_at_k_ks};

/// The main reward of a trial's `(name, value)` rewards: the one named `reward`, else the one
/// whose name sorts first; `None` without rewards.
///
/// By name, not by position: Harbor sorts reward names when it aggregates them, the runner's
/// records keep them sorted, but a record another tool wrote keeps its verifier's order, so a
/// reader going by position would pick another main reward than the runner did.
pub fn main_reward<'a, T>(rewards: impl IntoIterator<Item = (&'a str, T)>) -> Option<T> {
    let mut first: Option<(&str, T)> = None;
    for (name, value) in rewards {
        if name == "reward" {
            return Some(value);
        }
        if first.as_ref().is_none_or(|(least, _)| name < *least) {
            first = Some((name, value));
        }
    }
    first.map(|(_, value)| value)
}

/// Harbor's `Mean` metric: the average reward over all trials, `None` counted as 0; 0 when empty.
pub fn mean(rewards: &[Option<f64>]) -> f64 {
    if rewards.is_empty() {
        return 0.0;
    }
    rewards.iter().map(|r| r.unwrap_or(0.0)).sum::<f64>() / rewards.len() as f64
}

/// Harbor's pass@k per task group, averaged over tasks, for every k of [`pass_at_k_ks`].
///
/// Empty when there are no tasks, or when any reward is other than 0, 1 or `None` (pass@k is
/// only defined for binary rewards; `None` counts as 0), as in Harbor's `pass_at_k.py`.
pub fn pass_at_k<'a>(tasks: impl IntoIterator<Item = &'a [Option<f64>]>) -> Vec<(u64, f64)> {
    let tasks: Vec<&[Option<f64>]> = tasks.into_iter().collect();
    let binary = tasks
        .iter()
        .flat_map(|t| t.iter())
        .all(|r| matches!(r, None | Some(0.0) | Some(1.0)));
    let Some(min_trials) = tasks.iter().map(|t| t.len() as u64).min() else {
        return Vec::new();
    };
    if !binary {
        return Vec::new();
    }
    pass_at_k_ks(min_trials)
        .into_iter()
        .map(|k| {
            let total: f64 = tasks
                .iter()
                .map(|t| {
                    let c = t.iter().filter(|r| **r == Some(1.0)).count() as u64;
                    pass_at_k_estimate(t.len() as u64, c, k)
                })
                .sum();
            (k, total / tasks.len() as f64)
        })
        .collect()
}

/// The leaderboard's headline figures: accuracy and its standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaderboardAccuracy {
    /// Tasks with at least one trial.
    pub n_tasks: usize,
    /// Trials in all, errored ones included.
    pub n_trials: usize,
    /// Trials with reward > 0.
    pub n_successes: usize,
    /// `n_successes / n_trials` (a fraction, not a percentage); 0 without trials.
    pub accuracy: f64,
    /// Standard error of the accuracy; `None` when a task has fewer than two trials.
    pub stderr: Option<f64>,
}

/// Accuracy and standard error as the leaderboard computes them (docs/harbor-format.md §6.2 item 5).
///
/// A trial succeeds iff its reward is > 0; errored trials (`None`) count as failures and stay in
/// the denominator. Accuracy is successes over all trials. The standard error follows
/// `stderr² = (1/n²) Σ_tasks p(1−p)/(k−1)` with `n` the number of tasks, `p` a task's success
/// rate and `k` that task's own trial count: it is the variance of the mean of per-task success
/// rates, each estimated with the unbiased Bernoulli sample variance `k·p(1−p)/(k−1)` divided by
/// `k`. With equal k per task (the leaderboard case) accuracy equals that mean of per-task rates.
/// A task with a single trial has no variance estimate, so the standard error is then `None`.
pub fn leaderboard_accuracy<'a>(
    tasks: impl IntoIterator<Item = &'a [Option<f64>]>,
) -> LeaderboardAccuracy {
    let mut n_tasks = 0;
    let mut n_trials = 0;
    let mut n_successes = 0;
    let mut variance_sum = 0.0;
    let mut stderr_defined = true;
    for trials in tasks {
        if trials.is_empty() {
            continue;
        }
        let k = trials.len();
        let successes = trials.iter().filter(|r| r.is_some_and(|v| v > 0.0)).count();
        n_tasks += 1;
        n_trials += k;
        n_successes += successes;
        if k < 2 {
            stderr_defined = false;
        } else {
            let p = successes as f64 / k as f64;
            variance_sum += p * (1.0 - p) / (k - 1) as f64;
        }
    }
    let accuracy = if n_trials == 0 {
        0.0
    } else {
        n_successes as f64 / n_trials as f64
    };
    let stderr =
        (stderr_defined && n_tasks > 0).then(|| (variance_sum / (n_tasks * n_tasks) as f64).sqrt());
    LeaderboardAccuracy {
        n_tasks,
        n_trials,
        n_successes,
        accuracy,
        stderr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_reward_is_reward_else_the_first_name_in_sort_order() {
        assert_eq!(
            main_reward([("b", 0.5), ("reward", 1.0), ("a", 0.0)]),
            Some(1.0)
        );
        assert_eq!(main_reward([("tests", 1.0), ("lint", 0.0)]), Some(0.0));
        assert_eq!(main_reward([("only", 0.25)]), Some(0.25));
        assert_eq!(main_reward(Vec::<(&str, f64)>::new()), None);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn mean_counts_missing_rewards_as_zero() {
        assert_eq!(mean(&[]), 0.0);
        assert!(close(mean(&[Some(1.0), None, Some(0.5), Some(0.0)]), 0.375));
    }

    #[test]
    fn pass_at_k_averages_over_tasks_and_uses_the_minimum_trial_count() {
        let a = [Some(1.0), Some(0.0), None, Some(0.0), Some(1.0)]; // n=5, c=2
        let b = [
            Some(0.0),
            Some(0.0),
            Some(0.0),
            Some(0.0),
            Some(1.0),
            Some(1.0),
        ]; // n=6, c=2
        let got = pass_at_k([&a[..], &b[..]]);
        // min trials 5 → k ∈ {2, 4, 5}.
        let ks: Vec<u64> = got.iter().map(|(k, _)| *k).collect();
        assert_eq!(ks, [2, 4, 5]);
        // k=2: a = 0.7; b = 1 - (4/6)(3/5) = 0.6 → mean 0.65.
        assert!(close(got[0].1, 0.65), "{got:?}");
        // k=5: a = 1 (only 3 failures); b = 1 - (4/6)(3/5)(2/4)(1/3)(0) = 1 → 1.
        assert!(close(got[2].1, 1.0), "{got:?}");
    }

    #[test]
    fn pass_at_k_is_empty_for_non_binary_rewards() {
        let a = [Some(1.0), Some(0.5)];
        assert!(pass_at_k([&a[..]]).is_empty());
        assert!(pass_at_k(std::iter::empty::<&[Option<f64>]>()).is_empty());
    }

    #[test]
    fn leaderboard_accuracy_counts_errors_as_failures() {
        // Task a: 2 of 4 succeed (p=0.5, k=4); task b: 1 of 4 succeeds, one errored (p=0.25).
        let a = [Some(1.0), Some(0.0), Some(0.7), Some(0.0)];
        let b = [Some(1.0), None, Some(0.0), Some(0.0)];
        let got = leaderboard_accuracy([&a[..], &b[..]]);
        assert_eq!((got.n_tasks, got.n_trials, got.n_successes), (2, 8, 3));
        assert!(close(got.accuracy, 0.375));
        // stderr² = (1/4) (0.25/3 + 0.1875/3) = 0.4375/12 = 0.036458333…
        let expected = (0.4375f64 / 12.0).sqrt();
        assert!(close(got.stderr.unwrap(), expected), "{got:?}");
    }

    #[test]
    fn stderr_is_undefined_with_a_single_trial_task() {
        let a = [Some(1.0)];
        let got = leaderboard_accuracy([&a[..]]);
        assert_eq!(got.accuracy, 1.0);
        assert_eq!(got.stderr, None);
    }
}
