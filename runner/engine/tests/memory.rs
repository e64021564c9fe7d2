//! Memory per trial stays small: the heap's peak during a job of 1,500 trials exceeds that of
//! a job of 300 by less than [`MAX_BYTES_PER_TRIAL`] per extra trial. Counted by the
//! allocator (`testkit::alloc`), so the figure is the engine's own and not timing: what a job
//! must keep per trial by Harbor's formats (lock.json's and result.json's entries, the
//! trial's totals) is a few hundred bytes; a whole plan, record or lock entry per trial is
//! kilobytes and fails this. (Wall time at scale is `cargo bench -p engine --bench scale`.)

use testkit::alloc::{CountingAlloc, live_bytes, peak_bytes, reset_peak};
use testkit::instant::{run_instant_job, scratch_dir};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Measured 2026-12-01 at about 600 bytes (bench/README.md, "Scheduler scale"); before the
/// compact plan, lock and totals it was about 9.5 KB.
/// The record manifest (`record_manifest.jsonl`) is appended a line per trial and keeps
/// nothing in memory: while it was one JSON document rewritten as trials ended, it held every
/// finished trial's digests and the bound had to be 2,600.
const MAX_BYTES_PER_TRIAL: f64 = 1_500.0;

/// The heap's peak above what was live before, over one job of `trials` trials.
fn job_peak(rt: &tokio::runtime::Runtime, trials: u32) -> usize {
    // The figure does not depend on where the job dir is, and a durable write costs nothing
    // on tmpfs.
    let dir = scratch_dir();
    let before = live_bytes();
    reset_peak();
    let outcome = rt.block_on(run_instant_job(dir.path(), trials, 64));
    assert_eq!(outcome.results.len(), trials as usize);
    assert_eq!(outcome.coverage.scored, trials);
    let peak = peak_bytes().saturating_sub(before);
    drop(outcome);
    peak
}

#[test]
fn memory_per_trial_stays_small() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // A first job warms what the process keeps once (the runtime, lazily made tables).
    job_peak(&rt, 50);
    let (small, large) = (300, 1_500);
    let small_peak = job_peak(&rt, small);
    let large_peak = job_peak(&rt, large);
    let per_trial = (large_peak as f64 - small_peak as f64) / f64::from(large - small);
    eprintln!(
        "heap peak: {small} trials {small_peak} bytes, {large} trials {large_peak} bytes; {per_trial:.0} bytes per extra trial"
    );
    assert!(
        per_trial < MAX_BYTES_PER_TRIAL,
        "the heap's peak grows by {per_trial:.0} bytes per trial (over {MAX_BYTES_PER_TRIAL}): \
         something is kept whole per trial again (see bench/README.md, \"Scheduler scale\")"
    );
}
