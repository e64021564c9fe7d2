//! `runner run` against the real Docker engine: the example dataset, timeouts, malformed
//! tasks, Ctrl-C cleanup and reaping of a killed runner's containers.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::{
    Job, containers_with_label, ensure_base_image, exception, reward, runner, start_job_until,
    workspace_root,
};

/// Runs `agent` `k` times on the tasks at `tasks` (relative to the workspace root) into a fresh
/// jobs dir, which lives as long as the returned `TempDir`.
fn run_job(tasks: &str, agent: &str, k: u32) -> (tempfile::TempDir, Job, i32) {
    let jobs = tempfile::tempdir().unwrap();
    ensure_base_image();
    let assert = runner()
        .args([
            "run",
            "--agent",
            agent,
            "--k",
            &k.to_string(),
            "--n-concurrent",
            "4",
            "--jobs-dir",
        ])
        .arg(jobs.path())
        .arg("--path")
        .arg(workspace_root().join(tasks))
        .timeout(Duration::from_secs(900))
        .assert();
    let output = assert.get_output();
    let code = output.status.code().unwrap_or(-1);
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    let job = Job::single_in(jobs.path());
    (jobs, job, code)
}

/// One trial of the oracle on the task at `task`: what it recorded and what it logged.
struct OneTrial {
    _jobs: tempfile::TempDir,
    code: i32,
    result: serde_json::Value,
    log: String,
}

impl OneTrial {
    fn of(task: &str) -> OneTrial {
        let (jobs, job, code) = run_job(task, "oracle", 1);
        let (name, result) = job.trial_results().swap_remove(0);
        let log = job.trial_file(&name, "trial.log");
        OneTrial {
            _jobs: jobs,
            code,
            result,
            log,
        }
    }

    /// The trial ended as the agent's `VerifierKilledError`, counted as a result, once.
    fn assert_killed_as_the_agent(&self) {
        let (result, log) = (&self.result, &self.log);
        assert_eq!(self.code, 0, "an agent error is a result: {log}");
        assert_eq!(reward(result), None, "{log}");
        assert_eq!(
            result["exception_info"]["exception_type"], "VerifierKilledError",
            "{log}"
        );
        assert_eq!(result["outcome"], "agent_error", "{log}");
        assert_eq!(result["attempts"], 1, "agent errors are not retried: {log}");
    }
}

#[test]
fn oracle_solves_every_example_except_the_timeout_task() {
    let (_jobs, job, code) = run_job("tasks/examples", "oracle", 2);
    assert_eq!(code, 0, "every trial was scored, so the exit code is 0");
    let results = job.trial_results();
    assert!(results.len() >= 10, "5+ tasks × k=2, got {}", results.len());
    for (name, result) in &results {
        let task = result["task_name"].as_str().unwrap();
        assert!(result["finished_at"].is_string(), "{name}: finished_at");
        for phase in [
            "environment_setup",
            "agent_setup",
            "agent_execution",
            "verifier",
        ] {
            assert!(
                result[phase]["started_at"].is_string() && result[phase]["finished_at"].is_string(),
                "{name}: {phase} timing"
            );
        }
        assert_eq!(result["agent_info"]["name"], "oracle");
        assert_eq!(
            result["config"]["task"]["ref"],
            result["config"]["task"]["ref"]
        );
        if task.ends_with("slow-oracle") {
            assert_eq!(
                exception(result).as_deref(),
                Some("AgentTimeoutError"),
                "{name}"
            );
            assert_eq!(
                reward(result),
                Some(0.0),
                "{name}: the verifier still ran after the timeout"
            );
        } else {
            assert_eq!(
                exception(result),
                None,
                "{name}: {}",
                result["exception_info"]
            );
            assert_eq!(reward(result), Some(1.0), "{name}");
        }
        if task.ends_with("multi-reward") {
            let rewards = result["verifier_result"]["rewards"].as_object().unwrap();
            assert!(rewards.len() > 1, "{name}: several reward keys");
            let checks = result["verifier_result"]["checks"]
                .as_array()
                .expect("named checks");
            assert!(!checks.is_empty());
            assert_eq!(
                result["verifier_result"]["assertions_total"].as_u64(),
                Some(checks.len() as u64)
            );
        }
        // A multi-step trial keeps each step's verifier output under steps/<name>/.
        let verifier_dir = match result["step_results"].as_array() {
            Some(steps) => format!("steps/{}/verifier", steps[0]["step_name"].as_str().unwrap()),
            None => "verifier".to_owned(),
        };
        assert!(
            job.dir
                .join(name)
                .join(verifier_dir)
                .join("test-stdout.txt")
                .is_file(),
            "{name}: test output collected"
        );
        assert!(
            job.dir.join(name).join("trial.log").is_file(),
            "{name}: trial.log"
        );
        assert!(
            job.dir.join(name).join("config.json").is_file(),
            "{name}: config.json"
        );
    }
    let lock = job.json("lock.json");
    let images = lock["images"].as_object().unwrap();
    assert!(images.len() >= 5, "an image id per task in lock.json");
    assert!(
        lock["trials"][0]["task"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let config = job.json("config.json");
    assert_eq!(config["agents"][0]["name"], "oracle");
    assert_eq!(config["n_attempts"], 2);
    let result = job.json("result.json");
    assert_eq!(
        result["n_total_trials"].as_u64(),
        Some(results.len() as u64)
    );
    assert!(result["finished_at"].is_string());
    let eval = crate::support::only_eval(&result).clone();
    assert!(eval["pass_at_k"]["2"].as_f64().is_some());
    assert_eq!(
        eval["exception_stats"]["AgentTimeoutError"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(
        containers_with_label(&format!("runner.job={}", job.job_id())).is_empty(),
        "no container left behind"
    );
}

#[test]
fn nop_scores_zero_everywhere() {
    let (_jobs, job, code) = run_job("tasks/examples", "nop", 1);
    assert_eq!(code, 0);
    for (name, result) in job.trial_results() {
        assert_eq!(
            reward(&result),
            Some(0.0),
            "{name}: {}",
            result["exception_info"]
        );
        assert_eq!(result["agent_info"]["name"], "nop");
    }
    assert!(containers_with_label(&format!("runner.job={}", job.job_id())).is_empty());
}

#[test]
fn verifier_timeout_is_recorded() {
    let (_jobs, job, code) = run_job("tests/fixtures/tasks/verifier-timeout", "oracle", 1);
    assert_eq!(
        code, 0,
        "tests that outlive their deadline are an agent error (0), not missing data"
    );
    let (_, result) = &job.trial_results()[0];
    assert_eq!(exception(result).as_deref(), Some("VerifierTimeoutError"));
    assert_eq!(result["outcome"], "agent_error");
    assert_eq!(reward(result), None);
    let secs = {
        let v = &result["verifier"];
        let s = chrono_secs(v["started_at"].as_str().unwrap());
        let f = chrono_secs(v["finished_at"].as_str().unwrap());
        f - s
    };
    assert!(
        secs < 30.0,
        "the 3 s verifier deadline stopped a 120 s test ({secs} s)"
    );
}

fn chrono_secs(text: &str) -> f64 {
    // RFC 3339 with a Z; seconds since midnight is enough for a duration within one test.
    let time = text.split('T').nth(1).unwrap().trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next().unwrap().parse().unwrap();
    let m: f64 = parts.next().unwrap().parse().unwrap();
    let s: f64 = parts
        .next()
        .unwrap()
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap();
    h * 3600.0 + m * 60.0 + s
}

#[test]
fn malformed_task_is_reported_and_the_rest_run() {
    let (_jobs, job, code) = run_job("tests/fixtures/broken-dataset", "oracle", 1);
    assert_eq!(code, 2, "a skipped malformed task is bad input");
    let results = job.trial_results();
    assert_eq!(results.len(), 1, "only the good task ran");
    assert_eq!(reward(&results[0].1), Some(1.0));
}

#[test]
fn malformed_task_error_names_file_and_field() {
    let assert = runner()
        .args(["tasks", "digest"])
        .arg(workspace_root().join("tests/fixtures/broken-dataset"))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    testkit::assert_says_all(&stderr, &["bad-task/task.toml", "timeout_sec"]);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    testkit::assert_says_all(&stdout, &["sha256:", "good-task"]);
}

/// Starts `runner run` on the sleepy fixture and waits until its trial container exists.
fn start_sleepy(jobs: &Path) -> (Child, String) {
    start_job_until(
        &["--k", "1"],
        jobs,
        &workspace_root().join("tests/fixtures/tasks/sleepy"),
        "the sleepy trial never started its container",
        |label| !containers_with_label(label).is_empty(),
    )
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    None
}

/// Each signal a user or scheduler sends ends the run the same way (containers removed, the
/// cancel recorded) and exits 128 + its number, so Slurm or systemd sees the cause.
fn a_signal_removes_containers_and_records_the_cancel(signal: i32, name: &str) {
    let jobs = tempfile::tempdir().unwrap();
    let (mut child, job_id) = start_sleepy(jobs.path());
    unsafe { libc::kill(child.id() as i32, signal) };
    let code = wait_exit(&mut child, Duration::from_secs(60));
    assert_eq!(
        code,
        Some(128 + signal),
        "a run ended by {name} exits 128 + {signal}"
    );
    assert!(
        containers_with_label(&format!("runner.job={job_id}")).is_empty(),
        "{name} left a container"
    );
    let job = Job::single_in(jobs.path());
    let (_, result) = &job.trial_results()[0];
    assert_eq!(exception(result).as_deref(), Some("CancelledError"));
}

#[test]
fn ctrl_c_removes_containers_and_records_the_cancel() {
    a_signal_removes_containers_and_records_the_cancel(libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_removes_containers_and_exits_143() {
    a_signal_removes_containers_and_records_the_cancel(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sighup_removes_containers_and_exits_129() {
    a_signal_removes_containers_and_records_the_cancel(libc::SIGHUP, "SIGHUP");
}

#[test]
fn a_later_run_reaps_containers_of_a_killed_runner() {
    let jobs = tempfile::tempdir().unwrap();
    let (mut child, job_id) = start_sleepy(jobs.path());
    let label = format!("runner.job={job_id}");
    child.kill().unwrap(); // SIGKILL: no teardown at all
    child.wait().unwrap();
    assert!(
        !containers_with_label(&label).is_empty(),
        "a killed runner leaves its container"
    );
    let (_other_jobs, _, code) = run_job("tests/fixtures/tasks/quick", "oracle", 1);
    assert_eq!(code, 0);
    assert!(
        containers_with_label(&label).is_empty(),
        "the next run reaped the dead runner's container"
    );
}

#[test]
fn agent_deadline_really_stops_the_command_and_verification_still_runs() {
    let (_jobs, job, code) = run_job("tests/fixtures/tasks/killed-on-timeout", "oracle", 1);
    assert_eq!(code, 0, "the trial is scored despite the agent timeout");
    let (_, result) = &job.trial_results()[0];
    assert_eq!(exception(result).as_deref(), Some("AgentTimeoutError"));
    assert_eq!(
        reward(result),
        Some(1.0),
        "late.txt exists: the timed-out command kept running"
    );
}

#[test]
fn a_prebuilt_image_gets_its_environment_files_in_the_workdir() {
    let (_jobs, job, code) = run_job("tests/fixtures/tasks/prebuilt-image", "oracle", 1);
    assert_eq!(code, 0);
    let (name, result) = &job.trial_results()[0];
    assert_eq!(
        reward(result),
        Some(1.0),
        "{name}: {}",
        result["exception_info"]
    );
}

/// `/logs/artifacts` is downloaded once, after the tests (with the verifier jail's results),
/// so what the agent and what the tests left there are both kept, and its manifest entry is
/// settled then: `ok` when anything came, `empty` when nothing did.
#[test]
fn what_the_agent_and_the_tests_leave_in_logs_artifacts_is_kept() {
    let (_jobs, job, code) = run_job("tests/fixtures/tasks/artifacts-by-tests", "oracle", 1);
    assert_eq!(code, 0);
    let (name, result) = &job.trial_results()[0];
    assert_eq!(reward(result), Some(1.0), "{}", result["exception_info"]);
    job.assert_trial_files(
        name,
        &[
            ("artifacts/agent.txt", "from the agent\n"),
            ("artifacts/tests.txt", "from the tests\n"),
        ],
    );
    assert_eq!(
        job.artifact_manifest(name),
        [["/logs/artifacts", "artifacts", "directory", "ok"]]
    );
    assert_eq!(result["verifier_isolation"]["isolated"], true);

    let (_jobs, job, _) = run_job("tests/fixtures/tasks/quick", "nop", 1);
    let (name, _) = &job.trial_results()[0];
    let manifest = job.artifact_manifest(name);
    assert_eq!(manifest[0][3], "empty", "{manifest:?}");
}

/// The verifier jail is started early and waits for its order in the trial's PID namespace,
/// where the agent can see and kill it. Whether it still runs is learnt from the engine's wait
/// asked for at its start (no inspection before the order): a killed jail is noticed, and
/// the tests run in a fresh one, isolated, with their honest reward.
#[test]
fn an_agent_that_kills_the_waiting_verifier_jail_is_verified_in_a_fresh_one() {
    let trial = OneTrial::of("tests/fixtures/tasks/kills-waiting-jail");
    let (result, log) = (&trial.result, &trial.log);
    assert_eq!(trial.code, 0, "{}\n{log}", result["exception_info"]);
    assert_eq!(
        reward(result),
        Some(1.0),
        "the oracle killed the waiting jail and the tests ran: {log}"
    );
    assert!(
        log.contains(
            "the verifier jail started early is not running any more; starting a fresh one"
        ),
        "{log}"
    );
    assert_eq!(result["verifier_isolation"]["isolated"], true, "{log}");
}

#[test]
fn an_image_entrypoint_finds_the_logs_directories_at_the_containers_start() {
    let trial = OneTrial::of("tests/fixtures/tasks/entrypoint-writes-logs");
    let (result, log) = (&trial.result, &trial.log);
    assert_eq!(trial.code, 0, "{log}");
    assert_eq!(reward(result), Some(1.0), "{result:#}\n{log}");
}

/// The trial's `/logs` directories are made by the verifier jail as it starts (an upload into
/// the trial container beside that start held the container the start must look at): the
/// agent finds them as the upload made them, directories of mode 0777 owned by root, even
/// where the image has a file in their place or a directory of another mode.
#[test]
fn the_verifier_jail_makes_the_logs_directories_as_an_upload_did() {
    let (_jobs, job, code) = run_job("tests/fixtures/tasks/logs-dirs", "oracle", 1);
    let (name, result) = job.trial_results().swap_remove(0);
    let log = job.trial_file(&name, "trial.log");
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains(
            "/logs/agent, /logs/verifier, /logs/artifacts made by the verifier jail as it started"
        ),
        "{log}"
    );
    let modes = job.trial_file(&name, "agent/modes.txt");
    for dir in ["/logs/agent", "/logs/verifier", "/logs/artifacts"] {
        assert!(
            modes.contains(&format!("{dir} directory 777 0 0\n")),
            "{dir}: {modes}"
        );
    }
    assert_eq!(reward(&result), Some(1.0), "{result:#}\n{log}");
}

/// A single-step task's tests bigger than 1 MiB packed go into the waiting jail after its
/// start, not with its helper before it (so neither the start nor the `/logs` directories
/// wait for them): the tests still run whole, from the jail's own root.
#[test]
fn tests_too_big_to_go_in_before_the_jails_start_go_in_after_it_whole() {
    let task = tempfile::tempdir().unwrap();
    testkit::files::copy_dir(
        &workspace_root().join("tests/fixtures/tasks/logs-dirs"),
        task.path(),
    );
    // 3 MiB that no compression makes small, and a test that scores 1 only when all of it is
    // in /tests.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let data: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let big = task.path().join("tests/big.bin");
    std::fs::write(&big, &data).unwrap();
    let summed = std::process::Command::new("sha256sum")
        .arg(&big)
        .output()
        .unwrap();
    let digest = String::from_utf8(summed.stdout).unwrap()[..64].to_owned();
    std::fs::write(
        task.path().join("tests/test.sh"),
        format!(
            "#!/bin/bash\nif [ \"$(sha256sum /tests/big.bin | cut -d' ' -f1)\" = {digest} ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
        ),
    )
    .unwrap();
    let (_jobs, job, code) = run_job(task.path().to_str().unwrap(), "oracle", 1);
    let (name, result) = job.trial_results().swap_remove(0);
    let log = job.trial_file(&name, "trial.log");
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("verifier jail started early"), "{log}");
    assert_eq!(reward(&result), Some(1.0), "{result:#}\n{log}");
}

#[test]
fn an_agent_that_kills_every_jail_it_sees_fails_as_the_agent() {
    // The early jail dies while it waits, so the runner makes a fresh one at verification; the
    // same leftover kills that one too. Still the agent's failure, found through the fresh
    // jail's exit rather than a cut stream.
    let trial = OneTrial::of("tests/fixtures/tasks/kills-every-jail");
    trial.assert_killed_as_the_agent();
    assert!(
        trial.log.contains("started early is not running any more"),
        "the early jail was to be killed before its order: {}",
        trial.log
    );
}

#[test]
fn an_agent_that_kills_the_jail_while_the_tests_run_fails_at_once_and_is_not_retried() {
    // The warm jail's results come over its stdout; a leftover of the agent kills its helper
    // mid-run, which cuts that stream. The trial must end at once, as the agent's failure: an
    // infrastructure error would be retried and then missing, which would let an agent that
    // expects a 0 erase it.
    let trial = OneTrial::of("tests/fixtures/tasks/kills-jail-mid-run");
    trial.assert_killed_as_the_agent();
    let (result, log) = (&trial.result, &trial.log);
    let message = result["exception_info"]["exception_message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("killed by SIGKILL (exit 137)"),
        "{message}"
    );
    assert!(
        !log.contains("started early is not running any more"),
        "the jail was to be killed after its order, not before: {log}"
    );
    // Its tests sleep 3 s and have 30; the host's backstop is 55 s past the order.
    let verifier_secs: Vec<f64> = log
        .lines()
        .filter_map(|l| {
            l.split_once("phase: running verifier finished in ")?
                .1
                .strip_suffix('s')
        })
        .map(|secs| secs.parse().unwrap())
        .collect();
    assert!(!verifier_secs.is_empty(), "{log}");
    assert!(
        verifier_secs.iter().all(|&s| s < 10.0),
        "{verifier_secs:?}\n{log}"
    );
}
