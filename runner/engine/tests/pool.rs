//! The engine pool's logic on fake engines: trials spread by room, each record names its
//! engine, a start on an engine that stopped answering moves to another before the trial
//! hears of it, and a pool with no engine left fails the start as unreachable. (That a real
//! pool survives a killed dockerd is the e2e test `pool`.)

use std::sync::Arc;

use engine::pool::{EnginePool, PoolMember};
use engine::{Backend, BackendErrorKind, EngineCapacity};
use tasks::records::TrialResult;
use testkit::FakeBackend;
use testkit::backend::{StartGate, fault};
use testkit::instant::{job_dir, run_instant_job_on};

fn members(engines: &[FakeBackend]) -> Vec<PoolMember<FakeBackend>> {
    engines
        .iter()
        .enumerate()
        .map(|(i, backend)| PoolMember {
            name: format!("fake-{i}"),
            backend: backend.clone(),
            max_trials: None,
        })
        .collect()
}

async fn pool(engines: &[FakeBackend]) -> EnginePool<FakeBackend> {
    EnginePool::connect(members(engines), Arc::new(|_: &str| {}))
        .await
        .expect("the fake engines answer")
}

/// Runs `trials` trials of a one-task dataset (nop agent, reward 1) on `backend`, `n` at once;
/// the records.
async fn run<B: Backend>(backend: B, trials: u32, n: u32) -> Vec<TrialResult> {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_instant_job_on(backend, dir.path(), trials, n).await;
    testkit::records::on_disk(&job_dir(dir.path()), &outcome.results)
}

#[tokio::test]
async fn trials_spread_over_the_engines_by_room_and_name_their_engine() {
    // Every start waits until all four have begun, so all four are placed while the others
    // hold their room (by event: a start delay would race a loaded machine).
    let gate = StartGate::new(4);
    let engine = |cpus: f64| {
        let backend = FakeBackend::new();
        backend.script(|s| {
            s.capacity = EngineCapacity {
                cpus: Some(cpus),
                memory_mb: None,
            };
            s.start_gate = Some(gate.clone());
        });
        backend
    };
    let (big, small) = (engine(3.0), engine(1.0));
    let records = run(pool(&[big.clone(), small.clone()]).await, 4, 4).await;
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r.reward() == Some(1.0)));
    let on = |name: &str| {
        records
            .iter()
            .filter(|r| r.engine.as_deref() == Some(name))
            .count()
    };
    // Four at once: three on the 3-CPU engine, one on the 1-CPU engine.
    assert_eq!((on("fake-0"), on("fake-1")), (3, 1));
    assert_eq!(big.tally().started.len(), 3);
    assert_eq!(small.tally().started.len(), 1);
    // The image was made once per engine that ran the task.
    assert_eq!(
        big.tally().images_prepared + small.tally().images_prepared,
        2
    );
}

#[tokio::test]
async fn a_start_on_an_engine_that_stopped_answering_moves_to_another() {
    let gone = FakeBackend::new();
    let alive = FakeBackend::new();
    let pool = pool(&[gone.clone(), alive.clone()]).await;
    // The first engine fails the start and then no longer answers its ping.
    gone.script(|s| {
        s.start_faults
            .push_back(fault(BackendErrorKind::Start, "connection refused"));
        s.unreachable = true;
    });
    let records = run(pool, 1, 1).await;
    assert_eq!(
        records[0].reward(),
        Some(1.0),
        "{:?}",
        records[0].exception_info
    );
    assert_eq!(records[0].engine.as_deref(), Some("fake-1"));
    assert!(gone.tally().started.is_empty());
}

#[tokio::test]
async fn an_engine_that_answers_keeps_its_start_error_and_a_pool_with_none_left_is_unreachable() {
    let flaky = FakeBackend::new();
    flaky.script(|s| {
        s.start_faults
            .push_back(fault(BackendErrorKind::Start, "no such image"))
    });
    let pool = pool(std::slice::from_ref(&flaky)).await;
    let records = run(pool.clone(), 1, 1).await;
    let error = records[0]
        .exception_info
        .as_ref()
        .expect("the start failed");
    assert!(
        error
            .exception_message
            .contains("engine fake-0: no such image"),
        "{error:?}"
    );

    flaky.script(|s| {
        s.start_faults
            .push_back(fault(BackendErrorKind::Start, "connection refused"));
        s.unreachable = true;
    });
    let records = run(pool, 1, 1).await;
    let error = records[0]
        .exception_info
        .as_ref()
        .expect("no engine answers");
    assert!(
        error
            .exception_message
            .contains("no engine of the pool answers"),
        "{error:?}"
    );
    assert!(records[0].reward().is_none(), "never scored 0");
}
