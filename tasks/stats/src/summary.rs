//! Mean reward and pass@k of one set of tasks, with task-clustered 95% intervals.

use serde::Serialize;

use crate::bootstrap::{Interval, Resampling, percentile_interval, replicates};
use crate::pass_at_k::{pass_at_k_estimate, pass_at_k_ks};

/// How [`TaskSetStats`] intervals are computed, as recorded in results.
pub const INTERVAL_METHOD: &str = "cluster bootstrap over tasks, percentile";

/// Mean reward over all trials with its task-clustered uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeanEstimate {
    /// `Σ reward / trials`, missing rewards as 0 (Harbor's `Mean`).
    pub value: f64,
    /// 95% cluster-bootstrap interval; `None` with fewer than two tasks.
    pub ci: Option<Interval>,
    /// Cluster-robust standard error; `None` with fewer than two tasks.
    pub stderr_clustered: Option<f64>,
    /// Tasks with at least one trial.
    pub n_tasks: usize,
    /// Trials in all.
    pub n_trials: usize,
}

/// pass@k for one k with its interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassAtK {
    /// k.
    pub k: u64,
    /// Harbor's unbiased pass@k averaged over tasks.
    pub value: f64,
    /// 95% cluster-bootstrap interval; `None` with fewer than two tasks.
    pub ci: Option<Interval>,
}

/// Everything [`summarize`] estimates for one set of tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSetStats {
    /// Mean reward.
    pub mean: MeanEstimate,
    /// pass@k for Harbor's k values; empty unless every reward is 0, 1 or missing.
    pub pass_at_k: Vec<PassAtK>,
    /// [`INTERVAL_METHOD`].
    pub interval_method: &'static str,
    /// The resampling behind the intervals.
    pub resampling: Resampling,
}

/// One task reduced to what the estimators need.
struct Task {
    sum: f64,
    trials: usize,
    pass_at_k: Vec<f64>,
}

fn reward(r: &Option<f64>) -> f64 {
    r.unwrap_or(0.0)
}

/// The cluster-robust standard error of the mean over all trials, clustered by task (see the
/// crate docs for the formula); `None` with fewer than two non-empty tasks.
pub fn clustered_stderr<'a>(tasks: impl IntoIterator<Item = &'a [Option<f64>]>) -> Option<f64> {
    let sums: Vec<(f64, usize)> = tasks
        .into_iter()
        .filter(|t| !t.is_empty())
        .map(|t| (t.iter().map(reward).sum(), t.len()))
        .collect();
    stderr_of(&sums)
}

fn stderr_of(sums: &[(f64, usize)]) -> Option<f64> {
    let g = sums.len();
    if g < 2 {
        return None;
    }
    let n: usize = sums.iter().map(|(_, k)| k).sum();
    let mean = sums.iter().map(|(s, _)| s).sum::<f64>() / n as f64;
    let residual: f64 = sums
        .iter()
        .map(|(s, k)| (s - *k as f64 * mean).powi(2))
        .sum();
    let correction = g as f64 / (g - 1) as f64;
    Some((correction * residual).sqrt() / n as f64)
}

/// Mean and pass@k of the tasks' rewards (one slice per task; empty slices are skipped), with
/// intervals from one task bootstrap under `resampling`.
pub fn summarize<'a>(
    tasks: impl IntoIterator<Item = &'a [Option<f64>]>,
    resampling: &Resampling,
) -> TaskSetStats {
    let tasks: Vec<&[Option<f64>]> = tasks.into_iter().filter(|t| !t.is_empty()).collect();
    let binary = tasks
        .iter()
        .flat_map(|t| t.iter())
        .all(|r| matches!(r, None | Some(0.0) | Some(1.0)));
    let ks = match tasks.iter().map(|t| t.len() as u64).min() {
        Some(min) if binary => pass_at_k_ks(min),
        _ => Vec::new(),
    };
    let reduced: Vec<Task> = tasks
        .iter()
        .map(|t| {
            let n = t.len() as u64;
            let c = t.iter().filter(|r| **r == Some(1.0)).count() as u64;
            Task {
                sum: t.iter().map(reward).sum(),
                trials: t.len(),
                pass_at_k: ks.iter().map(|&k| pass_at_k_estimate(n, c, k)).collect(),
            }
        })
        .collect();
    let n_trials: usize = reduced.iter().map(|t| t.trials).sum();
    let g = reduced.len();
    let mean_value = if n_trials == 0 {
        0.0
    } else {
        reduced.iter().map(|t| t.sum).sum::<f64>() / n_trials as f64
    };
    let pass_values: Vec<f64> = (0..ks.len())
        .map(|i| reduced.iter().map(|t| t.pass_at_k[i]).sum::<f64>() / g as f64)
        .collect();

    let mut intervals: Vec<Option<Interval>> = vec![None; 1 + ks.len()];
    if g >= 2 {
        let reps = replicates(g, resampling, 1 + ks.len(), |drawn, out| {
            let (mut sum, mut trials) = (0.0, 0usize);
            out[1..].fill(0.0);
            for &i in drawn {
                let task = &reduced[i];
                sum += task.sum;
                trials += task.trials;
                for (slot, p) in out[1..].iter_mut().zip(&task.pass_at_k) {
                    *slot += p;
                }
            }
            out[0] = sum / trials as f64;
            for slot in &mut out[1..] {
                *slot /= drawn.len() as f64;
            }
        });
        for (slot, mut rep) in intervals.iter_mut().zip(reps) {
            *slot = Some(percentile_interval(&mut rep));
        }
    }
    let sums: Vec<(f64, usize)> = reduced.iter().map(|t| (t.sum, t.trials)).collect();
    TaskSetStats {
        mean: MeanEstimate {
            value: mean_value,
            ci: intervals[0],
            stderr_clustered: stderr_of(&sums),
            n_tasks: g,
            n_trials,
        },
        pass_at_k: ks
            .iter()
            .zip(pass_values)
            .zip(&intervals[1..])
            .map(|((&k, value), ci)| PassAtK { k, value, ci: *ci })
            .collect(),
        interval_method: INTERVAL_METHOD,
        resampling: *resampling,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::float_eq::close;

    #[test]
    fn clustered_stderr_matches_hand_computation() {
        // Task sums 2, 0, 1 over 2 trials each: N = 6, ȳ = 0.5, residuals 1, −1, 0.
        // se² = 3/2 · 2 / 36 = 1/12.
        let a = [Some(1.0), Some(1.0)];
        let b = [Some(0.0), None];
        let c = [Some(1.0), Some(0.0)];
        let se = clustered_stderr([&a[..], &b[..], &c[..]]).unwrap();
        assert!(close(se, (1.0f64 / 12.0).sqrt()), "{se}");
        // Equal k: the standard error of the per-task means (1, 0, 0.5): s² = 0.25, /3.
        assert!(close(se, (0.25f64 / 3.0).sqrt()));
        assert_eq!(clustered_stderr([&a[..]]), None);
    }

    #[test]
    fn clustered_stderr_weights_tasks_by_trials() {
        // Sums 3 (of 3 trials) and 0 (of 1 trial): N = 4, ȳ = 0.75, residuals 0.75 and −0.75.
        // se² = 2 · (0.5625 + 0.5625) / 16 = 0.140625.
        let a = [Some(1.0); 3];
        let b = [Some(0.0)];
        let se = clustered_stderr([&a[..], &b[..]]).unwrap();
        assert!(close(se, 0.140625f64.sqrt()), "{se}");
    }

    #[test]
    fn summarize_point_estimates_by_hand() {
        let a = [Some(1.0), Some(0.0), None, Some(0.0), Some(1.0)];
        let b = [
            Some(0.0),
            Some(0.0),
            Some(0.0),
            Some(1.0),
            Some(1.0),
            Some(1.0),
        ];
        let c = [Some(1.0); 5];
        let groups = [&a[..], &b[..], &c[..]];
        let stats = summarize(groups, &Resampling::default());
        assert!(close(stats.mean.value, 10.0 / 16.0));
        // pass@2 per task: a (n 5, c 2) 1 − (3/5)(2/4) = 0.7; b (n 6, c 3) 1 − (3/6)(2/5) =
        // 0.8; c 1 → 2.5/3. pass@4 and pass@5: fewer than k failures everywhere → 1.
        let expected = [(2, 2.5 / 3.0), (4, 1.0), (5, 1.0)];
        assert_eq!(stats.pass_at_k.len(), expected.len());
        for (got, (k, v)) in stats.pass_at_k.iter().zip(expected) {
            assert_eq!(got.k, k);
            assert!(close(got.value, v));
            let ci = got.ci.unwrap();
            assert!(ci.low <= got.value && got.value <= ci.high, "{got:?}");
        }
        assert_eq!((stats.mean.n_tasks, stats.mean.n_trials), (3, 16));
        assert_eq!(stats.interval_method, INTERVAL_METHOD);
    }

    #[test]
    fn bootstrap_interval_brackets_the_extremes_it_can_reach() {
        // Two tasks, one always solved, one never: a resample holds 0, 1 or 2 copies of the
        // solved task, so every replicate mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4;
        // the 2.5% and 97.5% percentiles are therefore 0 and 1.
        let a = [Some(1.0); 3];
        let b = [Some(0.0); 3];
        let stats = summarize([&a[..], &b[..]], &Resampling::default());
        assert_eq!(
            stats.mean.ci,
            Some(Interval {
                low: 0.0,
                high: 1.0
            })
        );
        // Identical tasks: no between-task variation, a zero-width interval.
        let stats = summarize([&a[..], &a[..]], &Resampling::default());
        assert_eq!(
            stats.mean.ci,
            Some(Interval {
                low: 1.0,
                high: 1.0
            })
        );
        assert_eq!(stats.mean.stderr_clustered, Some(0.0));
    }

    #[test]
    fn one_task_has_no_interval_and_non_binary_rewards_no_pass_at_k() {
        let a = [Some(1.0), Some(0.5)];
        let stats = summarize([&a[..]], &Resampling::default());
        assert!(close(stats.mean.value, 0.75));
        assert_eq!(stats.mean.ci, None);
        assert_eq!(stats.mean.stderr_clustered, None);
        assert!(stats.pass_at_k.is_empty());
        let empty = summarize(std::iter::empty::<&[Option<f64>]>(), &Resampling::default());
        assert_eq!((empty.mean.value, empty.mean.n_tasks), (0.0, 0));
    }

    #[test]
    fn the_same_seed_gives_the_same_interval() {
        let tasks: Vec<Vec<Option<f64>>> = (0..20)
            .map(|i| {
                (0..5)
                    .map(|j| Some(((i * 7 + j * 3) % 11) as f64 / 10.0))
                    .collect()
            })
            .collect();
        let run = |seed| {
            summarize(
                tasks.iter().map(Vec::as_slice),
                &Resampling {
                    seed,
                    ..Resampling::default()
                },
            )
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1).mean.ci, run(2).mean.ci);
    }
}
