//! The interval for one task's solve rate: within a task the trials are independent draws of
//! the same success probability, so the binomial Wilson score interval applies (unlike the
//! Wald interval it stays inside [0, 1] and is sensible at 0 of n and n of n).

use crate::bootstrap::Interval;

/// The 97.5% quantile of the standard normal distribution.
const Z_975: f64 = 1.959_963_984_540_054;

/// The 95% Wilson score interval for `successes` of `trials`; `None` without trials.
pub fn wilson_interval(successes: usize, trials: usize) -> Option<Interval> {
    if trials == 0 {
        return None;
    }
    let n = trials as f64;
    let p = successes as f64 / n;
    let z2 = Z_975 * Z_975;
    let denominator = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denominator;
    let half = Z_975 / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(Interval {
        low: (center - half).max(0.0),
        high: (center + half).min(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::float_eq::within;

    /// The published values have 4 or 5 significant digits.
    fn close(a: f64, b: f64) -> bool {
        within(a, b, 5e-5)
    }

    #[test]
    fn matches_published_values() {
        // 3 of 5: p = 0.6, z²/n = 0.76829, centre 0.55654, half-width 0.32582.
        let ci = wilson_interval(3, 5).unwrap();
        assert!(close(ci.low, 0.2307) && close(ci.high, 0.8824), "{ci:?}");
        // 0 of 5: [0, z²/(n + z²)] = [0, 0.43448].
        let ci = wilson_interval(0, 5).unwrap();
        assert!(close(ci.low, 0.0) && close(ci.high, 0.43448), "{ci:?}");
        // 5 of 5 mirrors it.
        let ci = wilson_interval(5, 5).unwrap();
        assert!(
            close(ci.low, 1.0 - 0.43448) && close(ci.high, 1.0),
            "{ci:?}"
        );
        assert_eq!(wilson_interval(0, 0), None);
    }
}
