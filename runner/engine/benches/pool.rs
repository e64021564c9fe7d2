//! The engine pool's own cost: `placement::choose` alone over ten engines, and a job of
//! 10,000 trials (64 at once, instant backend, nop agent) on one instant engine against the
//! same job on a pool of ten, so the pool's cost per trial (placement, reservation, the
//! per-engine image cell, the environment wrapper) can be read off.
//!
//!   cargo bench -p engine --bench pool

use std::sync::Arc;
use std::time::Instant;

use engine::EngineCapacity;
use engine::pool::placement::{self, Demand, Load, Slot};
use engine::pool::{EnginePool, PoolMember};
use testkit::InstantBackend;
use testkit::instant::{run_instant_job_on, scratch_dir};

const TRIALS: u32 = 10_000;
const ENGINES: usize = 10;

fn placement_alone() -> f64 {
    let demand = Demand {
        cpus: 1.0,
        memory_mb: 2048,
    };
    let mut slots = vec![
        Slot {
            healthy: true,
            capacity: EngineCapacity {
                cpus: Some(64.0),
                memory_mb: Some(262_144),
            },
            max_trials: None,
            load: Load::default(),
        };
        ENGINES
    ];
    let started = Instant::now();
    for i in 0..TRIALS as usize {
        let chosen = placement::choose(&slots, demand).expect("a healthy engine");
        slots[chosen].load = slots[chosen].load.plus(demand);
        // Keep about 64 running, as the job below does.
        if i >= 64 {
            let done = i % ENGINES;
            slots[done].load = slots[done].load.minus(demand);
        }
    }
    started.elapsed().as_secs_f64() / f64::from(TRIALS)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "pool benchmark: {TRIALS} trials, {ENGINES} instant engines, 64 at once, load average {}",
        testkit::load_average()
    );
    println!(
        "  placement alone: {:.2} µs per trial",
        placement_alone() * 1e6
    );
    let one = {
        let dir = scratch_dir();
        let started = Instant::now();
        rt.block_on(run_instant_job_on(InstantBackend, dir.path(), TRIALS, 64));
        started.elapsed().as_secs_f64()
    };
    let pooled = {
        let dir = scratch_dir();
        let started = Instant::now();
        rt.block_on(async {
            let members = (0..ENGINES)
                .map(|i| PoolMember {
                    name: format!("instant-{i}"),
                    backend: InstantBackend,
                    max_trials: None,
                })
                .collect();
            let pool = EnginePool::connect(members, Arc::new(|_: &str| {}))
                .await
                .expect("instant engines answer");
            run_instant_job_on(pool, dir.path(), TRIALS, 64).await
        });
        started.elapsed().as_secs_f64()
    };
    println!(
        "  one engine:      {one:.2} s ({:.0} trials/s)",
        f64::from(TRIALS) / one
    );
    println!(
        "  pool of {ENGINES}:      {pooled:.2} s ({:.0} trials/s)",
        f64::from(TRIALS) / pooled
    );
    println!(
        "  the pool's cost: {:.1} µs per trial",
        (pooled - one) / f64::from(TRIALS) * 1e6
    );
}
