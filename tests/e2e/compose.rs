//! Compose environments, the separate verifier and per-phase networks against the real Docker
//! engine: the examples score 1 with the oracle and 0 with nop, the sidecars' logs land in the
//! trial dir, bad compose files and GPU tasks are refused by name, and no container, network
//! or volume of the job is left behind. Every network check runs inside the containers and
//! reaches nothing but loopback and the trial's own sidecar.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use testkit::assert_says_all;

use crate::support::{
    Job, containers_with_label, ensure_base_image, exception, reward, runner, start_job_until,
    workspace_root,
};

/// Runs `agent` once on the task at `path` into a fresh jobs dir; nothing of the job (no
/// container, network or volume) may be left.
pub(crate) fn run(path: &Path, agent: &str) -> (tempfile::TempDir, Job) {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let assert = runner()
        .args(["run", "--agent", agent, "--max-retries", "0", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(path)
        .timeout(Duration::from_secs(600))
        .assert();
    eprintln!("{}", String::from_utf8_lossy(&assert.get_output().stderr));
    let job = Job::single_in(jobs.path());
    assert_nothing_left(&job);
    (jobs, job)
}

fn example(name: &str) -> std::path::PathBuf {
    workspace_root().join("tasks/examples").join(name)
}

/// Names of the `docker <kind>`s (network, volume) carrying `label`.
fn objects_with_label(kind: &str, label: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([kind, "ls", "-q", "--filter", &format!("label={label}")])
        .output()
        .expect("the docker CLI runs");
    assert!(out.status.success(), "docker {kind} ls failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn assert_nothing_left(job: &Job) {
    let label = format!("runner.job={}", job.job_id());
    assert!(containers_with_label(&label).is_empty(), "containers left");
    assert!(
        objects_with_label("network", &label).is_empty(),
        "networks left"
    );
    assert!(
        objects_with_label("volume", &label).is_empty(),
        "volumes left"
    );
}

/// The only trial's result and directory name.
fn only_trial(job: &Job) -> (String, serde_json::Value) {
    let mut results = job.trial_results();
    assert_eq!(results.len(), 1);
    results.remove(0)
}

/// The only trial's `EnvironmentStartError` message.
fn start_error(job: &Job) -> (String, String) {
    let (name, result) = only_trial(job);
    assert_eq!(
        exception(&result).as_deref(),
        Some("EnvironmentStartError"),
        "{name}"
    );
    let message = result["exception_info"]["exception_message"]
        .as_str()
        .unwrap();
    (name, message.to_owned())
}

fn scored(job: &Job, want: f64) -> String {
    let (name, result) = only_trial(job);
    assert_eq!(
        exception(&result),
        None,
        "{name}: {}",
        result["exception_info"]
    );
    assert_eq!(reward(&result), Some(want), "{name}");
    name
}

/// Runs the example `name` with the oracle, which must score 1 and pass `check` on its job and
/// trial, then with nop, which must score 0.
fn oracle_scores_and_nop_does_not(name: &str, check: impl FnOnce(&Job, &str)) {
    let (_jobs, job) = run(&example(name), "oracle");
    let trial = scored(&job, 1.0);
    check(&job, &trial);
    let (_jobs, job) = run(&example(name), "nop");
    scored(&job, 0.0);
}

#[test]
fn the_compose_example_queries_its_sidecar_and_keeps_its_log() {
    oracle_scores_and_nop_does_not("compose-sidecar", |job, trial| {
        let log = job.trial_file(trial, "sidecars/keeper.log");
        assert!(log.contains("GET /token"), "{log}");
        let trial_log = job.trial_file(trial, "trial.log");
        assert_says_all(&trial_log, &["started compose service keeper"]);
    });
}

#[test]
fn the_separate_verifier_sees_the_artifacts_and_not_the_decoy() {
    oracle_scores_and_nop_does_not("separate-verifier", |job, trial| {
        assert_says_all(
            &job.trial_file(trial, "verifier/test-stdout.txt"),
            &[
                "PASSED test_outputs.py::test_the_decoy_did_not",
                "PASSED test_outputs.py::test_this_is_not_the_agents_image",
            ],
        );
        assert_says_all(
            &job.trial_file(trial, "trial.log"),
            &[
                "separate verifier environment",
                "artifact /app/report.txt: uploaded to the verifier",
            ],
        );
    });
}

#[test]
fn the_agent_runs_offline_and_the_verifier_online_in_one_container() {
    oracle_scores_and_nop_does_not("agent-offline", |job, trial| {
        assert_says_all(
            &job.trial_file(trial, "trial.log"),
            &["network public -> no-network for the agent run"],
        );
    });
}

/// Run offline, the agent's solution: the sidecar must be out of reach (no interface, no
/// name), the shared volume still there.
const OFFLINE_SOLVE: &str = r#"#!/bin/bash
# Runs offline: the sidecar must be out of reach (no interface, no name), yet the shared
# volume is still there.
python3 - <<'PY' > /app/agent.txt
import socket
try:
    socket.create_connection(("keeper", 8080), timeout=3).close()
    print("reached")
except OSError as exc:
    print("unreachable")
PY
echo $(ls /sys/class/net | sort) >> /app/agent.txt
test -s /shared/token.txt && echo volume >> /app/agent.txt
exit 0
"#;

/// Run online, the verifier's checks: the agent's record, and the sidecar answering now.
const ONLINE_TESTS: &str = r#""""The agent was offline (no sidecar, only lo); the verifier is online (the sidecar answers)."""

import http.client
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def test_the_agent_could_not_reach_the_sidecar():
    lines = open("/app/agent.txt").read().split("\n")
    assert lines[0] == "unreachable", lines
    assert lines[1].split() == ["lo"], lines
    assert "volume" in lines, "the shared volume was missing while offline"


def test_the_verifier_reaches_the_sidecar():
    conn = http.client.HTTPConnection("keeper", 8080, timeout=10)
    conn.request("GET", "/token")
    token = conn.getresponse().read().decode()
    assert token == open("/shared/token.txt").read().strip()


if __name__ == "__main__":
    harness.main(globals())
"#;

#[test]
fn an_offline_agent_cannot_reach_its_sidecar_and_the_online_verifier_can() {
    let dir = edited_example(|task| {
        edit_file(task, "task.toml", |text| {
            text.replace("[agent]\n", "[agent]\nnetwork_mode = \"no-network\"\n")
                .replace("[verifier]\n", "[verifier]\nnetwork_mode = \"public\"\n")
        });
        std::fs::write(task.join("solution/solve.sh"), OFFLINE_SOLVE).unwrap();
        std::fs::write(task.join("tests/test_outputs.py"), ONLINE_TESTS).unwrap();
    });
    let (_jobs, job) = run(&dir.path().join("task"), "oracle");
    let trial = scored(&job, 1.0);
    let stdout = job.trial_file(&trial, "verifier/test-stdout.txt");
    assert!(stdout.contains("2 passed"), "{stdout}");
    let trial_log = job.trial_file(&trial, "trial.log");
    assert!(
        trial_log.contains("network no-network -> public for the rest of the trial"),
        "{trial_log}"
    );
}

/// A copy of the compose example with `edit` applied to its files, in a temp dir.
fn edited_example(edit: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-r")
        .arg(example("compose-sidecar"))
        .arg(dir.path().join("task"))
        .status()
        .unwrap();
    assert!(status.success());
    edit(&dir.path().join("task"));
    dir
}

/// Rewrites the file `rel` of the task at `task` through `edit`.
fn edit_file(task: &Path, rel: &str, edit: impl FnOnce(String) -> String) {
    let path = task.join(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(path, edit(text)).unwrap();
}

/// A copy of the compose example with its docker-compose.yaml rewritten through `edit`.
fn edited_compose_file(edit: impl FnOnce(String) -> String) -> tempfile::TempDir {
    edited_example(|task| edit_file(task, "environment/docker-compose.yaml", edit))
}

#[test]
fn a_compose_key_runner_cannot_run_is_refused_by_name() {
    let dir = edited_compose_file(|text| {
        text.replace(
            "    expose:\n",
            "    ports:\n      - \"8080:8080\"\n    expose:\n",
        )
    });
    let (_jobs, job) = run(&dir.path().join("task"), "oracle");
    let (_, message) = start_error(&job);
    assert!(
        message.contains("services.keeper") && message.contains("ports"),
        "{message}"
    );
}

#[test]
fn a_sidecar_that_never_gets_healthy_fails_the_start_and_leaves_nothing() {
    let dir = edited_compose_file(|text| {
        text.replace("('127.0.0.1', 8080)", "('127.0.0.1', 9)")
            .replace("retries: 30", "retries: 2")
    });
    let (_jobs, job) = run(&dir.path().join("task"), "oracle");
    let (name, message) = start_error(&job);
    assert!(
        message.contains("keeper never became service_healthy"),
        "{message}"
    );
    // Its log is kept even though the environment never started.
    assert!(job.dir.join(&name).join("sidecars/keeper.log").is_file());
}

#[test]
fn a_gpu_task_is_refused_naming_the_task_and_the_field_without_gpus() {
    let info = Command::new("docker")
        .args(["info", "--format", "{{json .Runtimes}}"])
        .output()
        .unwrap();
    let runtimes = String::from_utf8_lossy(&info.stdout).to_string();
    let dir = edited_example(|task| {
        std::fs::remove_file(task.join("environment/docker-compose.yaml")).unwrap();
        edit_file(task, "task.toml", |text| {
            text.replace("cpus = 1\n", "cpus = 1\ngpus = 1\n")
        });
    });
    let (_jobs, job) = run(&dir.path().join("task"), "oracle");
    if runtimes.contains("nvidia") {
        // An engine with GPUs runs the task (the token file is missing: reward 0, no error).
        let (name, result) = only_trial(&job);
        assert_eq!(exception(&result), None, "{name}");
        return;
    }
    let (_, message) = start_error(&job);
    assert!(
        message.contains("task examples/compose-sidecar")
            && message.contains("[environment] gpus = 1"),
        "{message}"
    );
}

/// Starts `runner run` on a compose task whose agent sleeps, and returns once the trial's
/// containers and network exist, with the job id. (A failed start panics the test, which
/// the test's own runner process outlives only until the trial's deadline.)
fn start_sleeping_compose(jobs: &Path, task: &Path) -> (std::process::Child, String) {
    start_job_until(&[], jobs, task, "the trial never started", |label| {
        // The sidecar and the main container: the environment is up.
        containers_with_label(label).len() >= 2 && !objects_with_label("network", label).is_empty()
    })
}

fn sleeping_compose_task() -> tempfile::TempDir {
    edited_example(|task| {
        std::fs::write(task.join("solution/solve.sh"), "#!/bin/bash\nsleep 120\n").unwrap();
    })
}

fn labelled_anything(label: &str) -> usize {
    containers_with_label(label).len()
        + objects_with_label("network", label).len()
        + objects_with_label("volume", label).len()
}

#[test]
fn ctrl_c_during_a_compose_trial_removes_its_sidecars_network_and_volume() {
    let task = sleeping_compose_task();
    let jobs = tempfile::tempdir().unwrap();
    let (mut child, job_id) = start_sleeping_compose(jobs.path(), &task.path().join("task"));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "an interrupted run exits 130");
    assert_eq!(labelled_anything(&format!("runner.job={job_id}")), 0);
}

#[test]
fn a_later_run_reaps_the_compose_objects_of_a_killed_runner() {
    let task = sleeping_compose_task();
    let jobs = tempfile::tempdir().unwrap();
    let (mut child, job_id) = start_sleeping_compose(jobs.path(), &task.path().join("task"));
    let label = format!("runner.job={job_id}");
    child.kill().unwrap(); // SIGKILL: no teardown at all
    child.wait().unwrap();
    assert!(
        labelled_anything(&label) >= 4,
        "a killed runner leaves its containers, network and volume"
    );
    run(
        &workspace_root().join("tests/fixtures/tasks/quick"),
        "oracle",
    );
    assert_eq!(
        labelled_anything(&label),
        0,
        "the next run reaped the dead runner's containers, network and volume"
    );
}

#[test]
fn mains_image_is_built_from_the_compose_files_build_and_runs_as_its_user_and_workdir() {
    let task = workspace_root().join("tests/fixtures/tasks/compose-main-build");
    let (_jobs, job) = run(&task, "oracle");
    let trial = scored(&job, 1.0);
    // Its PID 1 runs as the compose user, not root: the jail still joins it.
    let (_, result) = only_trial(&job);
    assert_eq!(result["verifier_isolation"]["isolated"], true, "{result:#}");
    assert_says_all(
        &job.trial_file(&trial, "trial.log"),
        &[
            "main's image: services.main.build of environment/docker-compose.yaml (context environment/, dockerfile main.Dockerfile, args MARKER)",
            "image runner-task-compose-main-build:",
        ],
    );
    // The second job finds the image by its content: no build on its path.
    let (_jobs, job) = run(&task, "nop");
    let trial = scored(&job, 0.0);
    let log = job.trial_file(&trial, "trial.log");
    assert!(
        log.contains("reused") && !log.contains("building runner-task-compose-main-build"),
        "{log}"
    );
}

#[test]
fn a_compose_task_without_any_image_for_main_fails_naming_the_file_and_what_to_add() {
    let dir = edited_example(|task| {
        std::fs::remove_file(task.join("environment/Dockerfile")).unwrap();
    });
    let (_jobs, job) = run(&dir.path().join("task"), "oracle");
    let (name, result) = only_trial(&job);
    let message = result["exception_info"]["exception_message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("task examples/compose-sidecar")
            && message.contains("environment/docker-compose.yaml: services.main has no image")
            && message.contains("add environment/Dockerfile, [environment] docker_image"),
        "{name}: {message}"
    );
}

#[test]
fn the_compose_files_main_image_replaces_the_tasks_docker_image() {
    // Harbor's prebuilt file gives main `image: ${PREBUILT_IMAGE_NAME}`; the task file's wins.
    // The task's own docker_image exists nowhere: pulling it would fail the trial.
    let dir = edited_example(|task| {
        std::fs::remove_file(task.join("environment/Dockerfile")).unwrap();
        edit_file(task, "task.toml", |text| {
            text.replace(
                "workdir = \"/app\"",
                "workdir = \"/app\"\ndocker_image = \"runner-absent-image:never\"",
            )
        });
        edit_file(task, "environment/docker-compose.yaml", |text| {
            text.replace("  main:\n", "  main:\n    image: runner-base:bookworm-py\n")
        });
    });
    let (_jobs, job) = run(&dir.path().join("task"), "oracle");
    let trial = scored(&job, 1.0);
    assert_says_all(
        &job.trial_file(&trial, "trial.log"),
        &[
            "main's image: runner-base:bookworm-py (services.main of environment/docker-compose.yaml)",
            "image runner-base:bookworm-py (reused",
        ],
    );
}
