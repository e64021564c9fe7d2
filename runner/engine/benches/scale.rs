//! The engine's own cost at scale: jobs of 1,000, 5,000 and 10,000 trials on a backend whose
//! operations take no time (`testkit::InstantBackend`), 64 at once, each job planned, run and
//! recorded into a fresh job directory. Prints the wall time, trials per second, and the
//! process's resident memory after each job, so memory per finished trial can be read off.
//!
//!   cargo bench -p engine --bench scale            job dirs under $TMPDIR (default /tmp)
//!   SCALE_DIR=/dev/shm cargo bench -p engine --bench scale

use std::time::Instant;

use testkit::instant::run_instant_job;

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
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "scale benchmark: instant backend, nop agent, 64 at once, job dirs in {}, load average {}",
        base.as_ref()
            .map_or_else(std::env::temp_dir, |b| b.clone())
            .display(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (rss0, _) = memory_kib();
    println!("  before any job: RSS {:.1} MiB", rss0 as f64 / 1024.0);
    let mut previous: Option<(u32, u64)> = None;
    for trials in [1_000u32, 5_000, 10_000] {
        let dir = match &base {
            Some(base) => tempfile::tempdir_in(base),
            None => tempfile::tempdir(),
        }
        .expect("a temporary directory");
        let started = Instant::now();
        let outcome = rt.block_on(run_instant_job(dir.path(), trials, 64));
        let took = started.elapsed().as_secs_f64();
        assert_eq!(
            outcome.results.len(),
            trials as usize,
            "every trial finished"
        );
        let (rss, hwm) = memory_kib();
        drop(outcome);
        println!(
            "  {trials:>6} trials: {took:.2}s ({:.0} trials/s), RSS after {:.1} MiB, peak {:.1} MiB",
            f64::from(trials) / took,
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        if let Some((n, peak)) = previous {
            let per_trial = (hwm.saturating_sub(peak) * 1024) as f64 / f64::from(trials - n);
            println!("          peak growth per extra trial: {per_trial:.0} bytes");
        }
        previous = Some((trials, hwm));
    }
}
