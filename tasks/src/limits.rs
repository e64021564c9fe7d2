//! The ranges every duration, count and size in `task.toml` must fall in, checked at load.
//!
//! Why: a value that passes a type check can still panic later when it is converted, inside a
//! trial, where the panic loses the trial's record (`Duration::from_secs_f64(1e20)` and
//! `Duration::from_secs_f64(-1.0)` both panic). Every bound here is small enough that the
//! conversion to [`Duration`] or to bytes (`u64`/`i64`) cannot overflow, and large enough for any
//! real task: the longest Terminal-Bench timeouts are a few hours.

use std::time::Duration;

/// Longest phase deadline (agent, verifier, environment build): one week.
pub const MAX_TIMEOUT_SEC: f64 = 7.0 * 24.0 * 3600.0;
/// Longest deadline of one healthcheck attempt: one hour.
pub const MAX_HEALTHCHECK_TIMEOUT_SEC: f64 = 3600.0;
/// Longest pause between healthcheck attempts (`interval_sec`, `start_interval_sec`): one hour.
pub const MAX_HEALTHCHECK_INTERVAL_SEC: f64 = 3600.0;
/// Longest healthcheck start period: one day.
pub const MAX_HEALTHCHECK_START_PERIOD_SEC: f64 = 24.0 * 3600.0;
/// Most consecutive healthcheck failures allowed before the check fails.
pub const MAX_HEALTHCHECK_RETRIES: u32 = 10_000;
/// Most CPUs a task may ask for.
pub const MAX_CPUS: f64 = 1024.0;
/// Largest memory limit: 4 TiB, in MB (`memory_mb × 2^20` stays far below `i64::MAX`).
pub const MAX_MEMORY_MB: u64 = 4 * 1024 * 1024;
/// Largest storage limit: 1 PiB, in MB (`storage_mb × 2^20` stays far below `i64::MAX`).
pub const MAX_STORAGE_MB: u64 = 1024 * 1024 * 1024;
/// Most GPUs a task may ask for.
pub const MAX_GPUS: u32 = 64;

/// An allowed interval of seconds (or of a plain number), with the words used in errors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The lower bound.
    pub min: f64,
    /// Whether `min` itself is allowed (`>= min`) or not (`> min`).
    pub min_inclusive: bool,
    /// The upper bound, always inclusive.
    pub max: f64,
    /// The unit printed after the bounds, e.g. `" seconds (1 week)"`; may be empty.
    pub unit: &'static str,
}

/// Phase deadlines: more than 0, at most a week.
pub const TIMEOUT: Range = Range::positive(MAX_TIMEOUT_SEC, " seconds (1 week)");
/// One healthcheck attempt: more than 0, at most an hour.
pub const HEALTHCHECK_TIMEOUT: Range =
    Range::positive(MAX_HEALTHCHECK_TIMEOUT_SEC, " seconds (1 hour)");
/// Pauses between healthcheck attempts: 0 (retry at once) to an hour.
pub const HEALTHCHECK_INTERVAL: Range =
    Range::non_negative(MAX_HEALTHCHECK_INTERVAL_SEC, " seconds (1 hour)");
/// The healthcheck start period: 0 to a day.
pub const HEALTHCHECK_START_PERIOD: Range =
    Range::non_negative(MAX_HEALTHCHECK_START_PERIOD_SEC, " seconds (1 day)");
/// CPUs: more than 0, at most [`MAX_CPUS`].
pub const CPUS: Range = Range::positive(MAX_CPUS, "");

impl Range {
    /// More than 0, at most `max`.
    pub const fn positive(max: f64, unit: &'static str) -> Range {
        Range {
            min: 0.0,
            min_inclusive: false,
            max,
            unit,
        }
    }

    /// 0 (allowed) to `max`.
    pub const fn non_negative(max: f64, unit: &'static str) -> Range {
        Range {
            min: 0.0,
            min_inclusive: true,
            max,
            unit,
        }
    }

    /// `Ok` when `value` is a finite number inside the range, else what is wrong and the limits.
    pub fn check(&self, value: f64) -> Result<(), OutOfRange> {
        let low_ok = if self.min_inclusive {
            value >= self.min
        } else {
            value > self.min
        };
        // NaN fails both comparisons, infinities fail one of them.
        if low_ok && value <= self.max {
            return Ok(());
        }
        let low = if self.min_inclusive {
            "at least"
        } else {
            "greater than"
        };
        Err(OutOfRange {
            value: (!value.is_nan()).then(|| format!("{value:?}")),
            low: format!("{low} {}", self.min),
            max: self.max.to_string(),
            unit: self.unit.to_owned(),
        })
    }
}

/// A `task.toml` number outside its field's limits; the message says what is wrong and the
/// limits, and the caller names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}: it must be {low} and at most {max}{unit}",
    match value { Some(value) => format!("{value} is out of range"), None => "is not a number".to_owned() }
)]
pub struct OutOfRange {
    /// The value as written in messages; `None` for NaN.
    value: Option<String>,
    /// The lower limit in words: `at least 1`, `greater than 0`.
    low: String,
    /// The upper limit.
    max: String,
    /// The unit after the upper limit (` seconds (1 week)`, ` MB (4 TiB)`), or nothing.
    unit: String,
}

/// `Ok` when `0 < value <= max`, else what is wrong and the limits (for MB sizes and counts).
pub fn check_positive_int(value: u64, max: u64, unit: &str) -> Result<(), OutOfRange> {
    if value > 0 && value <= max {
        Ok(())
    } else {
        Err(OutOfRange {
            value: Some(value.to_string()),
            low: "at least 1".to_owned(),
            max: max.to_string(),
            unit: unit.to_owned(),
        })
    }
}

/// Seconds as a [`Duration`], never panicking: NaN and negative values become zero and values
/// past [`MAX_TIMEOUT_SEC`] are clamped to it. Use it for every `task.toml` duration (they are
/// validated at load, so the clamp only matters for configs built in code).
pub fn duration_from_secs(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(secs.min(MAX_TIMEOUT_SEC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_refuse_nan_infinity_and_the_bounds_they_exclude() {
        assert!(TIMEOUT.check(600.0).is_ok());
        assert!(TIMEOUT.check(MAX_TIMEOUT_SEC).is_ok());
        let err = TIMEOUT.check(1e20).unwrap_err().to_string();
        assert_eq!(
            err,
            "1e20 is out of range: it must be greater than 0 and at most 604800 seconds (1 week)"
        );
        assert!(TIMEOUT.check(0.0).is_err());
        assert!(TIMEOUT.check(-1.0).is_err());
        assert!(TIMEOUT.check(f64::INFINITY).is_err());
        assert!(
            TIMEOUT
                .check(f64::NAN)
                .unwrap_err()
                .to_string()
                .starts_with("is not a number")
        );
        assert!(HEALTHCHECK_INTERVAL.check(0.0).is_ok());
        assert!(HEALTHCHECK_INTERVAL.check(-0.5).is_err());
        assert!(HEALTHCHECK_START_PERIOD.check(1e9).is_err());
        assert!(HEALTHCHECK_TIMEOUT.check(0.0).is_err());
        assert!(CPUS.check(0.5).is_ok());
        assert!(CPUS.check(1e6).is_err());
    }

    #[test]
    fn every_bound_converts_without_overflow() {
        for max in [
            MAX_TIMEOUT_SEC,
            MAX_HEALTHCHECK_TIMEOUT_SEC,
            MAX_HEALTHCHECK_INTERVAL_SEC,
            MAX_HEALTHCHECK_START_PERIOD_SEC,
        ] {
            assert!(Duration::try_from_secs_f64(max).is_ok());
        }
        let mib: u64 = 1 << 20;
        assert!(MAX_MEMORY_MB.checked_mul(mib).unwrap() < i64::MAX as u64);
        assert!(MAX_STORAGE_MB.checked_mul(mib).unwrap() < i64::MAX as u64);
    }

    #[test]
    fn positive_ints_name_their_limit() {
        assert!(check_positive_int(2048, MAX_MEMORY_MB, " MB").is_ok());
        assert_eq!(
            check_positive_int(0, 64, "").unwrap_err().to_string(),
            "0 is out of range: it must be at least 1 and at most 64"
        );
    }

    #[test]
    fn duration_from_secs_never_panics() {
        assert_eq!(duration_from_secs(1.5), Duration::from_millis(1500));
        assert_eq!(duration_from_secs(-1.0), Duration::ZERO);
        assert_eq!(duration_from_secs(f64::NAN), Duration::ZERO);
        assert_eq!(
            duration_from_secs(1e300),
            Duration::from_secs_f64(MAX_TIMEOUT_SEC)
        );
        assert_eq!(
            duration_from_secs(f64::INFINITY),
            Duration::from_secs_f64(MAX_TIMEOUT_SEC)
        );
    }
}
