//! The task bootstrap shared by every interval: resample units (tasks) with replacement under
//! a recorded seed, and read percentile intervals off the replicates.

use serde::Serialize;

use crate::{DEFAULT_PERMUTATIONS, DEFAULT_RESAMPLES, DEFAULT_SEED, LEVEL};

/// A two-sided interval at [`LEVEL`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

impl Interval {
    /// Whether `x` lies inside, bounds included.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// How resampling was done, recorded with every result so anyone can reproduce an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Resampling {
    /// Bootstrap resamples per interval.
    pub resamples: usize,
    /// Seed of the generator (fastrand's wyrand); the same seed gives the same interval.
    pub seed: u64,
    /// Random sign patterns of the sign-flip test when it is not enumerated exactly.
    pub permutations: usize,
}

impl Default for Resampling {
    fn default() -> Resampling {
        Resampling {
            resamples: DEFAULT_RESAMPLES,
            seed: DEFAULT_SEED,
            permutations: DEFAULT_PERMUTATIONS,
        }
    }
}

/// The `p`-quantile of sorted `values`, interpolating linearly between order statistics
/// (Hyndman–Fan type 7, the default of R and NumPy).
pub(crate) fn quantile(sorted: &[f64], p: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The percentile interval of bootstrap replicates (sorted in place).
pub(crate) fn percentile_interval(replicates: &mut [f64]) -> Interval {
    replicates.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0;
    Interval {
        low: quantile(replicates, tail),
        high: quantile(replicates, 1.0 - tail),
    }
}

/// Runs the bootstrap over `units` units: for each resample, `statistic` gets the drawn unit
/// indices (with repetition) and writes `n_stats` values. Returns one vector of replicates per
/// statistic.
pub(crate) fn replicates(
    units: usize,
    resampling: &Resampling,
    n_stats: usize,
    mut statistic: impl FnMut(&[usize], &mut [f64]),
) -> Vec<Vec<f64>> {
    let mut rng = fastrand::Rng::with_seed(resampling.seed);
    let mut out = vec![Vec::with_capacity(resampling.resamples); n_stats];
    let mut drawn = vec![0; units];
    let mut values = vec![0.0; n_stats];
    for _ in 0..resampling.resamples {
        for slot in drawn.iter_mut() {
            *slot = rng.usize(0..units);
        }
        statistic(&drawn, &mut values);
        for (stat, value) in out.iter_mut().zip(&values) {
            stat.push(*value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_interpolates_like_numpy() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&x, 0.0), 1.0);
        assert_eq!(quantile(&x, 0.5), 3.0);
        // h = 4 * 0.975 = 3.9 → 4 + 0.9 * (5 - 4)
        assert!((quantile(&x, 0.975) - 4.9).abs() < 1e-12);
        assert!((quantile(&x, 0.025) - 1.1).abs() < 1e-12);
        assert_eq!(quantile(&[7.0], 0.3), 7.0);
    }

    #[test]
    fn replicates_are_reproducible_from_the_seed() {
        let resampling = Resampling {
            resamples: 50,
            ..Resampling::default()
        };
        let run = |r: &Resampling| {
            replicates(10, r, 1, |drawn, out| {
                out[0] = drawn.iter().sum::<usize>() as f64
            })
        };
        assert_eq!(run(&resampling), run(&resampling));
        let other = Resampling {
            seed: 15,
            ..resampling
        };
        assert_ne!(run(&resampling), run(&other));
        assert_eq!(run(&resampling)[0].len(), 50);
    }
}
