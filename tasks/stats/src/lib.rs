//! Estimators for trial rewards, with 95% intervals that treat the **task** as the unit of
//! sampling: the k trials of one task share its difficulty, so they are not independent, and
//! an interval that counted them as independent draws would be far too narrow.
//!
//! # Methods
//!
//! A reward of `None` (an errored or unscored trial) counts as 0 everywhere, as in Harbor's
//! `Mean` and the leaderboards (`tasks::metrics`, which takes its pass@k formula from here:
//! this crate depends on nothing in the workspace, so records and reports can all use it).
//!
//! - **Mean reward** ([`summarize`]): Harbor's mean over all trials, `Σ y / N`. Its 95%
//!   interval is a **cluster bootstrap over tasks**: draw G tasks with replacement from the G
//!   tasks (each with all its trials), recompute the mean, repeat [`DEFAULT_RESAMPLES`] times,
//!   and take the 2.5th and 97.5th percentiles (linear interpolation between order
//!   statistics). Resampling uses a fixed seed ([`DEFAULT_SEED`], recorded in every result)
//!   so the same job always gives the same interval. Alongside it, the **cluster-robust
//!   standard error** of the same ratio estimator (Liang–Zeger with the G/(G−1) small-sample
//!   factor): `se² = G/(G−1) · Σ_g (S_g − n_g·ȳ)² / N²`, with `S_g` the reward sum and `n_g`
//!   the trial count of task g. With equal trials per task this is `s²_between / G`, the
//!   standard error of the mean of per-task means.
//! - **pass@k** ([`summarize`]): Harbor's unbiased per-task `1 − C(n−c, k)/C(n, k)`, averaged
//!   over tasks (only for 0/1 rewards), with the interval from the same task bootstrap (the
//!   same resampled task sets as the mean).
//! - **Paired comparison** ([`compare`]): tasks run in both jobs are paired. Per task,
//!   `d_g = mean_B,g − mean_A,g`; the difference is the mean of `d_g` over paired tasks (every
//!   task weighs the same). Its 95% interval is a paired bootstrap over tasks (resample the
//!   `d_g`); its p-value is a two-sided **sign-flip permutation test** on the `d_g` (under
//!   "no difference" each `d_g` is as likely to be positive as negative): exact over all
//!   2^m sign patterns of the m non-zero differences when m ≤ [`EXACT_SIGN_FLIP_MAX`], else
//!   [`DEFAULT_PERMUTATIONS`] random patterns with the (1 + hits)/(1 + draws) correction.
//!   Wins, losses and ties compare per-task means; a task **flipped** when it was solved
//!   (some trial with reward > 0, the leaderboard's success) in one job and in no trial of the
//!   other.
//! - **One task's solve rate** ([`wilson_interval`]): within a task the trials are
//!   independent draws, so the binomial Wilson score interval (0/1 rewards only).
//!
//! Intervals need at least two tasks; with one task they are `None`. With fewer than
//! [`FEW_TASKS`] tasks the bootstrap can take only a handful of distinct values and its
//! interval is too narrow: reports say so.

mod bootstrap;
mod paired;
mod pass_at_k;
mod summary;
mod wilson;

#[cfg(test)]
mod float_eq;

pub use bootstrap::{Interval, Resampling};
pub use paired::{
    Comparison, DIFFERENCE_METHOD, PairedOutcome, SignFlipTest, TEST_METHOD, TaskPair, compare,
};
pub use pass_at_k::{pass_at_k_estimate, pass_at_k_ks};
pub use summary::{
    INTERVAL_METHOD, MeanEstimate, PassAtK, TaskSetStats, clustered_stderr, summarize,
};
pub use wilson::wilson_interval;

/// The confidence level of every interval here.
pub const LEVEL: f64 = 0.95;

/// Below this many tasks an interval is reported with a caveat: the cluster bootstrap
/// undercovers with few clusters (at 89 tasks its measured coverage is 93–94%).
pub const FEW_TASKS: usize = 10;

/// The seed of every resampling unless the caller picks another; recorded with each result.
pub const DEFAULT_SEED: u64 = 14;

/// Bootstrap resamples per interval: enough that the 2.5% and 97.5% percentiles move by well
/// under a tenth of the interval width between seeds.
pub const DEFAULT_RESAMPLES: usize = 2_000;

/// Random sign patterns of the sign-flip test when exact enumeration is too large.
pub const DEFAULT_PERMUTATIONS: usize = 10_000;

/// Up to this many non-zero paired differences the sign-flip test enumerates all 2^m patterns.
pub const EXACT_SIGN_FLIP_MAX: usize = 16;
