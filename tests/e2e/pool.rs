//! A pool of real Docker engines in one run (`--docker-host`, repeatable): the machine's own
//! engine and two more started by `scripts/docker-engines.sh` (each its own dockerd, data
//! root and socket). The examples score on the pool as on one engine with every engine used;
//! SIGKILLing one engine's dockerd while trials run on it loses no trial (each ends scored
//! once, the retried ones keep an attempt naming the lost engine, nothing is left on the
//! others); the next run on the restarted engine reaps what the lost one left.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    Job, containers_with_label_on, ensure_base_image, runner_bin, workspace_root,
};

const DEFAULT_ENGINE: &str = "unix:///var/run/docker.sock";

/// The tests of this file share the extra engines, and one kills an engine: one at a time.
pub(crate) static ENGINES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Starts (or finds running) extra engines 1..=2 and returns their URLs.
pub(crate) fn extra_engines() -> [String; 2] {
    ensure_base_image();
    let status = Command::new("bash")
        .arg(workspace_root().join("scripts/docker-engines.sh"))
        .args(["start", "2"])
        .status()
        .expect("bash runs");
    assert!(
        status.success(),
        "scripts/docker-engines.sh start 2 failed: the pool tests need extra dockerd engines"
    );
    [1, 2].map(|i| format!("unix:///run/runner-engines/{i}/docker.sock"))
}

fn pool_args(engines: &[&str]) -> Vec<String> {
    engines
        .iter()
        .flat_map(|e| ["--docker-host".to_owned(), (*e).to_owned()])
        .collect()
}

/// Containers of the job `job_id` on the engine at `url`.
fn job_containers(url: &str, job_id: &str) -> Vec<String> {
    containers_with_label_on(Some(url), &format!("runner.job={job_id}"))
}

#[test]
fn the_examples_score_on_a_pool_of_three_engines_as_on_one() {
    let _engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    let [one, two] = extra_engines();
    let jobs = tempfile::tempdir().unwrap();
    let output = Command::new(runner_bin())
        .args(["run", "--agent", "oracle", "-n", "4", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(workspace_root().join("tasks/examples"))
        .args(pool_args(&[DEFAULT_ENGINE, &one, &two]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let job = Job::single_in(jobs.path());
    let results = job.trial_results();
    assert_eq!(results.len(), 10, "{stderr}");
    let used = examples_scored_as_on_one_engine(&results);
    assert_eq!(used.len(), 3, "every engine took trials: {used:?}");
    // job.log (and `--progress lines`, the same words) says where each trial's environment
    // went as it started: the live view's load per engine comes from those events.
    let log = std::fs::read_to_string(job.dir.join("job.log")).unwrap();
    for (trial, result) in &results {
        let engine = result["engine"].as_str().unwrap();
        assert!(
            log.contains(&format!("trial {trial}: environment on engine {engine}")),
            "{trial} on {engine}: {log}"
        );
    }
    // lock.json names each task's image on every engine that ran its trials.
    let lock = job.json("lock.json");
    for (trial, result) in &results {
        let task = result["task_name"].as_str().unwrap();
        let engine = result["engine"].as_str().unwrap();
        let id = &lock["engine_images"][task][engine];
        assert!(
            id.as_str().is_some_and(|id| id.starts_with("sha256:")),
            "{trial}: {task} on {engine}: {}",
            lock["engine_images"]
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    // A compose task's sidecars on the extra engines (placement alone may have kept it on the
    // machine's own): main reaches its sidecar there too.
    let sidecars = tempfile::tempdir().unwrap();
    let output_sidecar = Command::new(runner_bin())
        .args([
            "run",
            "--agent",
            "oracle",
            "--k",
            "2",
            "-n",
            "2",
            "--jobs-dir",
        ])
        .arg(sidecars.path())
        .arg("--path")
        .arg(workspace_root().join("tasks/examples/compose-sidecar"))
        .args(pool_args(&[&one, &two]))
        .output()
        .unwrap();
    let sidecar_err = String::from_utf8_lossy(&output_sidecar.stderr);
    assert_eq!(output_sidecar.status.code(), Some(0), "{sidecar_err}");
    let sidecar_job = Job::single_in(sidecars.path());
    for (trial, result) in sidecar_job.trial_results() {
        assert_eq!(
            crate::support::reward(&result),
            Some(1.0),
            "{trial}: {result}"
        );
    }
    for engine in [DEFAULT_ENGINE, &one, &two] {
        // The start names each engine's capacity; the summary counts its trials.
        assert!(stderr.contains(&format!("engine {engine}: ")), "{stderr}");
        let trials = results
            .iter()
            .filter(|(_, r)| r["engine"] == engine)
            .count();
        assert!(
            stdout.contains(&format!("engine {engine}: {trials} trial(s)")),
            "{stdout}"
        );
    }
}

/// A dataset of `n` tasks whose oracle takes `secs` seconds.
/// Asserts that the examples' oracle trials scored as on one engine (slow-oracle's oracle
/// outlives its 5 s agent timeout by design: 0 on any engine; every other task 1), each on an
/// engine its record names; the engines used.
pub(crate) fn examples_scored_as_on_one_engine(
    results: &[(String, serde_json::Value)],
) -> std::collections::BTreeSet<String> {
    let mut used = std::collections::BTreeSet::new();
    for (trial, result) in results {
        let engine = result["engine"]
            .as_str()
            .unwrap_or_else(|| panic!("{trial}: no engine"));
        used.insert(engine.to_owned());
        let want = if trial.starts_with("slow-oracle") {
            0.0
        } else {
            1.0
        };
        assert_eq!(
            crate::support::reward(result),
            Some(want),
            "{trial} on {engine}: {}",
            result["exception_info"]
        );
    }
    used
}

fn sleepy_tasks(root: &Path, n: usize, secs: u32) {
    for i in 0..n {
        let task = root.join(format!("sleepy-{i}"));
        for sub in ["environment", "solution", "tests"] {
            std::fs::create_dir_all(task.join(sub)).unwrap();
        }
        std::fs::write(
            task.join("task.toml"),
            format!(
                "schema_version = \"1.3\"\n[task]\nname = \"pool/sleepy-{i}\"\n\
                 [agent]\ntimeout_sec = 120.0\n[verifier]\ntimeout_sec = 60.0\n\
                 [environment]\nbuild_timeout_sec = 300.0\ncpus = 1\nmemory_mb = 512\n"
            ),
        )
        .unwrap();
        std::fs::write(task.join("instruction.md"), "Wait, then write /app/done.\n").unwrap();
        std::fs::write(
            task.join("environment/Dockerfile"),
            "FROM runner-base:bookworm-py\nWORKDIR /app\n",
        )
        .unwrap();
        std::fs::write(
            task.join("solution/solve.sh"),
            // No `sleep 0` for a task that answers at once.
            match secs {
                0 => "#!/bin/bash\necho done > /app/done\n".to_owned(),
                _ => format!("#!/bin/bash\nsleep {secs}\necho done > /app/done\n"),
            },
        )
        .unwrap();
        std::fs::write(
            task.join("tests/test.sh"),
            "#!/bin/bash\nif [ \"$(cat /app/done)\" = done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
        )
        .unwrap();
    }
}

/// The trial dirs whose trial.log says their agent phase runs on `engine`.
fn agents_running_on(job_dir: &Path, engine: &str) -> usize {
    let on = format!("on engine {engine}");
    std::fs::read_dir(job_dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|trial| {
                std::fs::read_to_string(trial.path().join("trial.log")).is_ok_and(|log| {
                    log.contains(&on) && log.contains("phase: running agent started")
                })
            })
            .count()
    })
}

#[test]
fn losing_an_engine_mid_job_loses_no_trial_and_its_leftovers_are_reaped_later() {
    let _engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    let [one, two] = extra_engines();
    let tasks = tempfile::tempdir().unwrap();
    sleepy_tasks(tasks.path(), 6, 15);
    let jobs = tempfile::tempdir().unwrap();
    let engines = [DEFAULT_ENGINE, one.as_str(), two.as_str()];
    let child = Command::new(runner_bin())
        .args([
            "run",
            "--agent",
            "oracle",
            "-n",
            "6",
            "--max-retries",
            "2",
            "--jobs-dir",
        ])
        .arg(jobs.path())
        .arg("--path")
        .arg(tasks.path())
        .args(pool_args(&engines))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once a trial's agent runs on engine 2, its dockerd is killed outright.
    let deadline = Instant::now() + Duration::from_secs(300);
    let job_dir = loop {
        assert!(Instant::now() < deadline, "no trial's agent ran on {two}");
        let dirs: Vec<_> = std::fs::read_dir(jobs.path())
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        if let Some(dir) = dirs.first()
            && agents_running_on(dir, &two) > 0
        {
            break dir.clone();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let pid = std::fs::read_to_string("/run/runner-engines/2/docker.pid").unwrap();
    let killed = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("engine {two} does not answer")),
        "{stderr}"
    );

    let job = Job::single_in(jobs.path());
    let results = job.trial_results();
    assert_eq!(results.len(), 6, "{stderr}");
    let mut moved = 0;
    for (trial, result) in &results {
        assert_eq!(
            crate::support::reward(result),
            Some(1.0),
            "{trial}: {result}"
        );
        assert_eq!(result["outcome"], "scored", "{trial}");
        let engine = result["engine"].as_str().unwrap();
        assert_ne!(engine, two, "{trial} ended on the lost engine");
        let first = job_dir.join(trial).join("attempts/1/result.json");
        if let Ok(text) = std::fs::read_to_string(&first) {
            let attempt: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(attempt["engine"], two.as_str(), "{trial}: {attempt}");
            assert_eq!(attempt["outcome"], "infra_error", "{trial}: {attempt}");
            moved += 1;
        }
    }
    assert!(
        moved >= 1,
        "a trial that ran on the lost engine was retried elsewhere"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!(
            "engine {two}: 0 trial(s), 0 with an exception, {moved} attempt(s) lost"
        )),
        "{stdout}"
    );
    let job_id = job.json("result.json")["id"].as_str().unwrap().to_owned();
    for engine in [DEFAULT_ENGINE, one.as_str()] {
        assert!(
            job_containers(engine, &job_id).is_empty(),
            "the job left containers on {engine}"
        );
    }

    // The engine comes back with the containers the lost run left; the next run that uses it
    // reaps them (their owner is gone).
    let [_, two_again] = extra_engines();
    let left = job_containers(&two_again, &job_id);
    assert!(
        !left.is_empty(),
        "the lost engine kept the job's containers"
    );
    // The reaping run's own trial needs no wait: a task of the same shape whose oracle
    // answers at once.
    let quick = tempfile::tempdir().unwrap();
    sleepy_tasks(quick.path(), 1, 0);
    let again = tempfile::tempdir().unwrap();
    let output = Command::new(runner_bin())
        .args(["run", "--agent", "oracle", "--jobs-dir"])
        .arg(again.path())
        .arg("--path")
        .arg(quick.path().join("sleepy-0"))
        .args(pool_args(&[&two_again]))
        .env("RUNNER_DOCKER_HOSTS", "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        job_containers(&two_again, &job_id).is_empty(),
        "the next run on {two_again} reaped the lost run's containers: {stderr}"
    );
}

#[test]
fn engines_the_pool_cannot_use_are_refused_by_name_before_anything_runs() {
    let jobs = tempfile::tempdir().unwrap();
    let examples = workspace_root().join("tasks/examples/hello-file");
    let refused = |args: &[&str], says: &[&str]| {
        let output = Command::new(runner_bin())
            .args(["run", "--agent", "oracle", "--jobs-dir"])
            .arg(jobs.path())
            .arg("--path")
            .arg(&examples)
            .args(args)
            .env_remove("RUNNER_DOCKER_HOSTS")
            // A context store without contexts.
            .env("DOCKER_CONFIG", jobs.path().join("no-docker-config"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        for text in says {
            assert!(stderr.contains(text), "{args:?}: {stderr}");
        }
    };
    refused(
        &["--docker-host", "ssh://me@build-1/engine"],
        // Named with its user-info redacted (a user name may be a token).
        &["ssh://***@build-1/engine", "without a path"],
    );
    refused(
        &["--docker-host", "https://build-1:2376"],
        &["https://build-1:2376", "DOCKER_TLS_VERIFY"],
    );
    refused(
        &["--docker-host", "unix:///run/docker.sock#n=0"],
        &["#n=0", "n=N"],
    );
    refused(
        &["--docker-context", "remote"],
        &["--docker-context remote", "no Docker context remote"],
    );
    let written: Vec<_> = std::fs::read_dir(jobs.path()).unwrap().flatten().collect();
    assert!(written.is_empty(), "nothing was written: {written:?}");
    // An engine that does not answer is refused before any trial runs (its job dir, made
    // before the engines are asked, stays empty).
    refused(
        &["--docker-host", "unix:///nonexistent/docker.sock"],
        &["--docker-host unix:///nonexistent/docker.sock"],
    );
    // The client library's own words are generic; the causes below them say what failed.
    refused(
        &["--docker-host", "tcp://127.0.0.1:1"],
        &[
            "error: --docker-host tcp://127.0.0.1:1: cannot reach the engine: ",
            "\ncaused by: ",
            "Connection refused",
        ],
    );
    for job in std::fs::read_dir(jobs.path()).unwrap() {
        let job = job.unwrap().path();
        let inside = std::fs::read_dir(&job).unwrap().count();
        assert_eq!(inside, 0, "{}", job.display());
    }
}
