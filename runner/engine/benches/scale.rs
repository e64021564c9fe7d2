//! The engine's own cost at scale: jobs of 1,000, 5,000 and 10,000 trials on a backend whose
//! operations take no time (`testkit::InstantBackend`), 64 at once, each job planned, run and
//! recorded into a fresh job directory. Prints the wall time, trials per second, the heap's
//! peak during each job and what is live after it (counted by `testkit::alloc`), and the
//! process's resident memory, so memory per trial can be read off.
//!
//!   cargo bench -p engine --bench scale            job dirs under $TMPDIR (default /tmp)
//!   SCALE_DIR=/dev/shm cargo bench -p engine --bench scale

use std::time::Instant;

use testkit::alloc::{CountingAlloc, live_bytes, peak_bytes, reset_peak};
use testkit::instant::run_instant_job;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const MIB: f64 = 1024.0 * 1024.0;

/// `VmRSS` and `VmHWM` of this process, in KiB.
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let base = std::env::var_os("SCALE_DIR").map(std::path::PathBuf::from);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "scale benchmark: instant backend, nop agent, 64 at once, job dirs in {}, load average {}",
        base.as_ref()
            .map_or_else(std::env::temp_dir, |b| b.clone())
            .display(),
        testkit::load_average()
    );
    let (rss0, _) = memory_kib();
    println!("  before any job: RSS {:.1} MiB", rss0 as f64 / 1024.0);
    let mut previous: Option<(u32, u64, usize)> = None;
    for trials in [1_000u32, 5_000, 10_000] {
        let dir = match &base {
            Some(base) => tempfile::tempdir_in(base),
            None => tempfile::tempdir(),
        }
        .expect("a temporary directory");
        let before = live_bytes();
        reset_peak();
        let started = Instant::now();
        let outcome = rt.block_on(run_instant_job(dir.path(), trials, 64));
        let took = started.elapsed().as_secs_f64();
        assert_eq!(
            outcome.results.len(),
            trials as usize,
            "every trial finished"
        );
        let heap_peak = peak_bytes().saturating_sub(before);
        let kept = live_bytes().saturating_sub(before);
        let (rss, hwm) = memory_kib();
        drop(outcome);
        println!(
            "  {trials:>6} trials: {took:.2}s ({:.0} trials/s); heap peak +{:.2} MiB, kept +{:.2} MiB; RSS after {:.1} MiB, peak {:.1} MiB",
            f64::from(trials) / took,
            heap_peak as f64 / MIB,
            kept as f64 / MIB,
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        if let Some((n, peak, heap)) = previous {
            let extra = f64::from(trials - n);
            let rss_per_trial = (hwm.saturating_sub(peak) * 1024) as f64 / extra;
            let heap_per_trial = (heap_peak as f64 - heap as f64) / extra;
            println!(
                "          per extra trial: heap peak {heap_per_trial:.0} bytes, peak RSS {rss_per_trial:.0} bytes"
            );
        }
        previous = Some((trials, hwm, heap_peak));
    }
}
