//! Float comparison for the estimators' tests.

/// Whether `a` and `b` differ by less than `tolerance`.
pub(crate) fn within(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() < tolerance
}

/// Whether `a` and `b` are equal but for rounding (1e-12): for values computed by hand.
pub(crate) fn close(a: f64, b: f64) -> bool {
    within(a, b, 1e-12)
}
