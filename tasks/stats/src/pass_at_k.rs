//! Harbor's unbiased pass@k for one task, and the k values it reports. `tasks::metrics`
//! re-exports these so every figure in the workspace uses the same formula.

/// The unbiased pass@k estimate for one task with `n` trials of which `c` succeeded:
/// `1 - Π_{i<k} (n-c-i)/(n-i)`; 1 when fewer than `k` trials failed. `k` must be ≤ `n`.
pub fn pass_at_k_estimate(n: u64, c: u64, k: u64) -> f64 {
    debug_assert!(k <= n, "pass@{k} needs at least {k} trials, got {n}");
    if n.saturating_sub(c) < k {
        return 1.0;
    }
    let mut all_fail = 1.0;
    for i in 0..k {
        all_fail *= (n - c - i) as f64 / (n - i) as f64;
    }
    1.0 - all_fail
}

/// The k values Harbor reports for a minimum of `min_trials` trials per task:
/// `{2, 4, 8, …} ∪ {5, 10, 15, …}` up to `min_trials`, ascending.
pub fn pass_at_k_ks(min_trials: u64) -> Vec<u64> {
    let mut ks = Vec::new();
    let mut k = 2;
    while k <= min_trials {
        ks.push(k);
        k *= 2;
    }
    let mut k = 5;
    while k <= min_trials {
        ks.push(k);
        k += 5;
    }
    ks.sort_unstable();
    ks.dedup();
    ks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::float_eq::close;

    #[test]
    fn pass_at_k_estimate_matches_hand_computation() {
        // n=5, c=2, k=2: 1 - (3/5)(2/4) = 1 - 0.3 = 0.7
        assert!(close(pass_at_k_estimate(5, 2, 2), 0.7));
        // n=5, c=1, k=4: 1 - (4/5)(3/4)(2/3)(1/2) = 1 - 0.2 = 0.8
        assert!(close(pass_at_k_estimate(5, 1, 4), 0.8));
        // n=5, c=0: never passes; n=5, c=4, k=2: only one failure, so 1.
        assert_eq!(pass_at_k_estimate(5, 0, 5), 0.0);
        assert_eq!(pass_at_k_estimate(5, 4, 2), 1.0);
    }

    #[test]
    fn ks_are_powers_of_two_and_multiples_of_five() {
        assert_eq!(pass_at_k_ks(1), Vec::<u64>::new());
        assert_eq!(pass_at_k_ks(5), [2, 4, 5]);
        assert_eq!(pass_at_k_ks(16), [2, 4, 5, 8, 10, 15, 16]);
    }
}
