//! Simulation: on synthetic clustered data, the 95% intervals cover the true value about 95%
//! of the time, and the sign-flip test rejects a true null about 5% of the time. Every draw
//! comes from fixed seeds, so the figures are the same on every run.
//!
//! The model: 89 tasks (Terminal-Bench 2's count), 5 trials each. Task g has success
//! probability p_g = u², u uniform on [0, 1], so tasks differ a lot (intra-task correlation
//! 0.4) and trials of one task are far from independent. The truth is the population value:
//! E[p] = 1/3, and pass@k = 1 − E[(1 − u²)^k] = 1 − Π_{j=1..k} 2j/(2j + 1).

use std::collections::BTreeMap;

use stats::{Resampling, clustered_stderr, compare, summarize};

const TASKS: usize = 89;
const TRIALS: usize = 5;
const DATASETS: usize = 1000;
/// Fewer resamples than the default keep this test fast in debug builds; coverage hardly
/// depends on it.
const RESAMPLING: Resampling = Resampling {
    resamples: 500,
    seed: 7,
    permutations: 500,
};

fn trials(rng: &mut fastrand::Rng, p: f64) -> Vec<Option<f64>> {
    (0..TRIALS)
        .map(|_| Some(if rng.f64() < p { 1.0 } else { 0.0 }))
        .collect()
}

fn difficulties(rng: &mut fastrand::Rng) -> Vec<f64> {
    (0..TASKS).map(|_| rng.f64().powi(2)).collect()
}

fn pass_at_k_truth(k: u64) -> f64 {
    1.0 - (1..=k)
        .map(|j| (2 * j) as f64 / (2 * j + 1) as f64)
        .product::<f64>()
}

/// The band a correct 95% interval lands in: ±3 binomial standard errors over 1000 datasets
/// is ±2.1 points; the lower edge allows the percentile bootstrap's known slight
/// undercoverage with a finite number of clusters.
fn assert_near_95(name: &str, covered: usize) {
    let rate = covered as f64 / DATASETS as f64;
    eprintln!("{name}: {rate:.3}");
    assert!(
        (0.92..=0.975).contains(&rate),
        "{name}: coverage {rate:.3} is not near 0.95"
    );
}

#[test]
fn mean_and_pass_at_k_intervals_cover_about_95_percent() {
    let mut rng = fastrand::Rng::with_seed(2026);
    let truth = 1.0 / 3.0;
    let (mut boot, mut se, mut naive) = (0, 0, 0);
    let mut pass = BTreeMap::<u64, usize>::new();
    for _ in 0..DATASETS {
        let tasks: Vec<Vec<Option<f64>>> = difficulties(&mut rng)
            .into_iter()
            .map(|p| trials(&mut rng, p))
            .collect();
        let stats = summarize(tasks.iter().map(Vec::as_slice), &RESAMPLING);
        let mean = stats.mean.value;
        boot += stats.mean.ci.unwrap().contains(truth) as usize;
        let stderr = clustered_stderr(tasks.iter().map(Vec::as_slice)).unwrap();
        se += ((mean - truth).abs() <= 1.96 * stderr) as usize;
        // The interval that treats the 445 trials as independent draws.
        let n = (TASKS * TRIALS) as f64;
        naive += ((mean - truth).abs() <= 1.96 * (mean * (1.0 - mean) / n).sqrt()) as usize;
        for p in &stats.pass_at_k {
            *pass.entry(p.k).or_default() += p.ci.unwrap().contains(pass_at_k_truth(p.k)) as usize;
        }
    }
    assert_near_95("mean, cluster bootstrap", boot);
    assert_near_95("mean, clustered stderr", se);
    let naive_rate = naive as f64 / DATASETS as f64;
    eprintln!("naive {naive_rate:.3}");
    assert!(
        naive_rate < 0.85,
        "the trial-independent interval should undercover on clustered data, got {naive_rate:.3}"
    );
    assert_eq!(pass.keys().copied().collect::<Vec<_>>(), [2, 4, 5]);
    for (k, covered) in pass {
        assert_near_95(&format!("pass@{k}"), covered);
    }
}

#[test]
fn paired_difference_covers_about_95_percent_and_the_test_holds_its_size() {
    let mut rng = fastrand::Rng::with_seed(2027);
    // Job B is better by 0.1 on every task's success probability (capped at 1). The truth is
    // E[min(1, u² + 0.1)] − E[u²], with the cap reached for u > √0.9.
    let r = 0.9f64.sqrt();
    let truth = (r.powi(3) / 3.0 + 0.1 * r + (1.0 - r)) - 1.0 / 3.0;
    let (mut covered, mut null_rejections) = (0, 0);
    for _ in 0..DATASETS {
        let p = difficulties(&mut rng);
        let job = |rng: &mut fastrand::Rng, shift: f64| -> BTreeMap<String, Vec<Option<f64>>> {
            p.iter()
                .enumerate()
                .map(|(g, p)| (format!("task-{g:02}"), trials(rng, (p + shift).min(1.0))))
                .collect()
        };
        let a = job(&mut rng, 0.0);
        let b = job(&mut rng, 0.1);
        covered += compare(&a, &b, &RESAMPLING).ci.unwrap().contains(truth) as usize;
        let same = job(&mut rng, 0.0);
        let test = compare(&a, &same, &RESAMPLING).test.unwrap();
        null_rejections += (test.p_value < 0.05) as usize;
    }
    assert_near_95("paired difference", covered);
    let size = null_rejections as f64 / DATASETS as f64;
    eprintln!("size {size:.3}");
    assert!(
        (0.03..=0.07).contains(&size),
        "the sign-flip test rejected a true null in {size:.3} of datasets, expected about 0.05"
    );
}
