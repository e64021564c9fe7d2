//! The image prefetch on the fake backend: prebuilt images of later tasks are prepared while
//! early trials run, builds are left to their trials, and lock.json records each image.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adapter::AnyAgent;
use engine::events::Event;
use engine::job::{plan_job, run_job};
use tasks::Dataset;
use testkit::{FakeBackend, TaskFixture};
use tokio_util::sync::CancellationToken;

/// A task whose solution takes `solve_sleep` seconds; prebuilt (`docker_image`, no Dockerfile)
/// or built (a Dockerfile, no `docker_image`).
fn write_task(dataset: &Path, name: &str, prebuilt: bool, solve_sleep: f64) {
    let dir = dataset.join(name);
    let toml = if prebuilt {
        format!("[environment]\ndocker_image = \"127.0.0.1:5000/{name}:1\"")
    } else {
        String::new()
    };
    TaskFixture::new(&format!("test/{name}"))
        .toml(&toml)
        .test_sh("echo 1 > /logs/verifier/reward.txt")
        .file(
            "solution/solve.sh",
            &format!("#!/bin/bash\nsleep {solve_sleep}\n"),
        )
        .write(&dir);
    if prebuilt {
        std::fs::remove_file(dir.join("environment/Dockerfile")).unwrap();
    }
}

/// Runs the dataset one trial at a time and returns each event with when it arrived.
async fn run_one_at_a_time(dir: &Path, backend: FakeBackend) -> Vec<(Duration, Event)> {
    let dataset = Dataset::load(&dir.join("dataset")).expect("the dataset loads");
    let agent = AnyAgent::builtin("oracle").unwrap();
    let settings = {
        let mut settings = testkit::job_settings(dir, "job", &agent, 1);
        settings.watchdog_grace = engine::trial::watchdog::DEFAULT_GRACE;
        settings
    };
    let plan = plan_job(&dataset, &settings);
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    run_job(
        backend,
        agent,
        plan,
        dir.join("jobs/job"),
        &settings,
        CancellationToken::new(),
        // Each event carries its time since the job started, stamped as it was sent.
        move |timed| {
            seen.lock()
                .unwrap()
                .push((timed.elapsed, timed.event.clone()))
        },
    )
    .await
    .expect("the job directory is written");
    Arc::try_unwrap(events).unwrap().into_inner().unwrap()
}

fn ready_at(events: &[(Duration, Event)], task: &str) -> Duration {
    events
        .iter()
        .find_map(|(at, e)| match e {
            Event::ImageReady { task: t, .. } if t == task => Some(*at),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no ImageReady for {task}"))
}

fn first_finish(events: &[(Duration, Event)]) -> Duration {
    events
        .iter()
        .find_map(|(at, e)| matches!(e, Event::TrialFinished(_)).then_some(*at))
        .expect("a trial finished")
}

#[tokio::test]
async fn later_prebuilt_images_are_ready_before_the_first_trial_ends() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        write_task(&dir.path().join("dataset"), name, true, 1.5);
    }
    let backend = FakeBackend::new();
    backend.script(|s| s.image_delay = Duration::from_millis(300));
    let events = run_one_at_a_time(dir.path(), backend.clone()).await;
    let first_done = first_finish(&events);
    // One trial at a time: without the prefetch, c's image would be prepared only after the
    // trials of a and b had finished.
    assert!(
        ready_at(&events, "test/c") < first_done,
        "c ready at {:?}, first trial done at {first_done:?}",
        ready_at(&events, "test/c")
    );
    assert_eq!(backend.tally().images_prepared, 3, "each image once");
    // c's image was prepared before its trial started: its output is copied into trial.log.
    let c_trial = events
        .iter()
        .find_map(|(_, e)| match e {
            Event::TrialFinished(r) if r.task_name == "test/c" => Some(r.trial_name.clone()),
            _ => None,
        })
        .unwrap();
    let log = std::fs::read_to_string(dir.path().join("jobs/job").join(c_trial).join("trial.log"))
        .unwrap();
    assert!(
        log.contains("was prepared ahead of this trial") && log.contains("fake build of test/c"),
        "{log}"
    );
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("jobs/job/lock.json")).unwrap())
            .unwrap();
    for trial in lock["trials"].as_array().unwrap() {
        let image = &trial["task"]["image"];
        assert_eq!(image["id"], "sha256:fake", "{trial}");
        assert_eq!(image["origin"], "built");
    }
}

#[tokio::test]
async fn builds_are_left_to_the_trial_that_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    write_task(&dir.path().join("dataset"), "a", true, 1.0);
    write_task(&dir.path().join("dataset"), "b", false, 0.0);
    let backend = FakeBackend::new();
    backend.script(|s| s.image_delay = Duration::from_millis(100));
    let events = run_one_at_a_time(dir.path(), backend).await;
    assert!(ready_at(&events, "test/b") > first_finish(&events));
}
