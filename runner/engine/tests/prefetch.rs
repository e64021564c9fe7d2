//! The image prefetch on the fake backend: prebuilt images of later tasks are prepared while
//! early trials run, builds are left to their trials, and lock.json records each image.
//!
//! Ordered by events, never by how long anything takes: a trial's solution waits for a file
//! the test writes when an event arrives, and assertions compare the order events arrived in.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use adapter::AnyAgent;
use engine::events::Event;
use engine::job::{plan_job, run_job};
use tasks::Dataset;
use testkit::{FakeBackend, TaskFixture};
use tokio_util::sync::CancellationToken;

/// A task whose solution, when `wait_for` is given, waits (polling, at most a minute) until
/// that host file exists; prebuilt (`docker_image`, no Dockerfile) or built (a Dockerfile,
/// no `docker_image`).
fn write_task(dataset: &Path, name: &str, prebuilt: bool, wait_for: Option<&Path>) {
    let dir = dataset.join(name);
    let toml = if prebuilt {
        format!("[environment]\ndocker_image = \"127.0.0.1:5000/{name}:1\"")
    } else {
        String::new()
    };
    let solve = match wait_for {
        Some(file) => format!(
            "#!/bin/bash\nfor _ in $(seq 600); do [ -e '{}' ] && exit 0; sleep 0.1; done\n",
            file.display()
        ),
        None => "#!/bin/bash\n".to_owned(),
    };
    TaskFixture::new(&format!("test/{name}"))
        .toml(&toml)
        .test_sh("echo 1 > /logs/verifier/reward.txt")
        .file("solution/solve.sh", &solve)
        .write(&dir);
    if prebuilt {
        std::fs::remove_file(dir.join("environment/Dockerfile")).unwrap();
    }
}

/// Runs the dataset one trial at a time and returns its events in the order they arrived;
/// `signal` is a task and a file made as soon as that task's image is ready.
async fn run_one_at_a_time(
    dir: &Path,
    backend: FakeBackend,
    signal: Option<(&str, PathBuf)>,
) -> Vec<Event> {
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
    let signal = signal.map(|(task, file)| (task.to_owned(), file));
    run_job(
        backend,
        agent,
        plan,
        dir.join("jobs/job"),
        &settings,
        CancellationToken::new(),
        move |timed| {
            if let (Some((task, file)), Event::ImageReady { task: ready, .. }) =
                (&signal, &timed.event)
                && ready == task
            {
                std::fs::write(file, "ready").unwrap();
            }
            seen.lock().unwrap().push(timed.event.clone())
        },
    )
    .await
    .expect("the job directory is written");
    Arc::try_unwrap(events).unwrap().into_inner().unwrap()
}

/// Where `task`'s `ImageReady` stands among the events.
fn ready_at(events: &[Event], task: &str) -> usize {
    events
        .iter()
        .position(|e| matches!(e, Event::ImageReady { task: t, .. } if t == task))
        .unwrap_or_else(|| panic!("no ImageReady for {task}"))
}

/// Where the first `TrialFinished` stands among the events.
fn first_finish(events: &[Event]) -> usize {
    events
        .iter()
        .position(|e| matches!(e, Event::TrialFinished(_)))
        .expect("a trial finished")
}

/// The trial.log of `task`'s trial.
fn trial_log(dir: &Path, events: &[Event], task: &str) -> String {
    let trial = events
        .iter()
        .find_map(|e| match e {
            Event::TrialFinished(r) if r.task_name == task => Some(r.trial_name.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no trial of {task} finished"));
    std::fs::read_to_string(dir.join("jobs/job").join(trial).join("trial.log")).unwrap()
}

#[tokio::test]
async fn later_prebuilt_images_are_ready_before_the_first_trial_ends() {
    let dir = tempfile::tempdir().unwrap();
    // The first trial (a's) ends only once c's image is ready: with the prefetch that is at
    // once; without it, c's image would wait for the trials of a and b, so a's solution gives
    // up after its minute and its trial ends first, failing the order asserted below.
    let c_ready = dir.path().join("c-ready");
    for name in ["a", "b", "c"] {
        write_task(&dir.path().join("dataset"), name, true, Some(&c_ready));
    }
    let backend = FakeBackend::new();
    let events = run_one_at_a_time(dir.path(), backend.clone(), Some(("test/c", c_ready))).await;
    // One trial at a time: without the prefetch, c's image would be prepared only after the
    // trials of a and b had finished.
    assert!(
        ready_at(&events, "test/c") < first_finish(&events),
        "{events:#?}"
    );
    assert_eq!(backend.tally().images_prepared, 3, "each image once");
    // c's image was prepared before its trial started: its output is copied into trial.log.
    let log = trial_log(dir.path(), &events, "test/c");
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
    write_task(&dir.path().join("dataset"), "a", true, None);
    write_task(&dir.path().join("dataset"), "b", false, None);
    let backend = FakeBackend::new();
    let events = run_one_at_a_time(dir.path(), backend.clone(), None).await;
    // b's trial starts only after a's ended (one at a time), so b's image came after.
    assert!(
        ready_at(&events, "test/b") > first_finish(&events),
        "{events:#?}"
    );
    // And its own trial built it: a prefetch of a build claims the image when the job
    // starts, before any trial (the prefetch is spawned first, and the test's runtime runs
    // tasks in the order they were spawned), so its trial.log would say it was prepared ahead.
    let log = trial_log(dir.path(), &events, "test/b");
    assert!(
        log.contains("fake build of test/b") && !log.contains("was prepared ahead of this trial"),
        "{log}"
    );
    assert_eq!(backend.tally().images_prepared, 2, "each image once");
}
