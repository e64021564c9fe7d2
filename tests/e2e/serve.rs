//! `runner serve` end to end: the binary serves the examples (and a fixture task with a small
//! `storage_mb`) on loopback, and `tests/e2e/serve/driver.py` drives it with the published
//! `openenv-core` client and the Terminal-Bench wrapper's models, as a trainer would. The
//! driver's Python is `.cache/openenv/bin/python` (made by `scripts/openenv-venv.sh`, which
//! `.ci/run` calls) or `$RUNNER_OPENENV_PYTHON`; without it these tests fail.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    containers_with_label, ensure_base_image, runner, runner_bin, workspace_root,
};

/// The examples every oracle test serves: all but `slow-oracle`, whose oracle is meant to
/// outlast its time limit (the timeout test runs it). The multi-step task is driven step by
/// step (each step's oracle, then evaluate).
const ORACLE_TASKS: [&str; 9] = [
    "examples/agent-offline",
    "examples/artifacts",
    "examples/compose-sidecar",
    "examples/hello-file",
    "examples/multi-reward",
    "examples/no-network",
    "examples/nonroot-workdir",
    "examples/separate-verifier",
    "examples/two-step-gate",
];

/// The multi-step example and its steps, in order.
const STEPS_TASK: (&str, [&str; 2]) = ("examples/two-step-gate", ["draft", "finalize"]);

/// The Python with `openenv-core` installed.
fn python() -> PathBuf {
    let path = std::env::var_os("RUNNER_OPENENV_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".cache/openenv/bin/python"));
    let ok = Command::new(&path)
        .args(["-c", "import openenv.core.generic_client, websockets"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import openenv-core: run `bash scripts/openenv-venv.sh` (or set RUNNER_OPENENV_PYTHON)",
        path.display()
    );
    path
}

fn serve_dir() -> PathBuf {
    workspace_root().join("tests/e2e/serve")
}

/// A `runner serve` in the background, stopped (SIGTERM) when dropped.
struct Served {
    child: Child,
    url: String,
    /// The credential it printed at start, when it generated one.
    credential: Option<String>,
    /// The network its sessions' containers join.
    network: Option<String>,
    jobs: tempfile::TempDir,
}

impl Served {
    /// Serves `dataset` on a free loopback port with `args`; returns once it listens.
    fn start(dataset: &Path, args: &[&str]) -> Served {
        ensure_base_image();
        let jobs = tempfile::tempdir().expect("a temp dir");
        let mut child = Command::new(runner_bin())
            .args(["serve", "--port", "0", "--job-name", "served", "--jobs-dir"])
            .arg(jobs.path())
            .arg("--path")
            .arg(dataset)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runner serve starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[runner serve] {line}");
                let _ = tx.send(line);
            }
        });
        let mut credential = None;
        let mut network = None;
        let url = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .expect("runner serve says where it listens within two minutes");
            if let Some(rest) = line.split("containers join network ").nth(1) {
                network = rest.split([' ', ',']).next().map(str::to_owned);
            }
            if let Some(token) = line.strip_prefix("credential: ") {
                credential = Some(token.trim().to_owned());
            }
            if let Some(rest) = line.split(" on http://").nth(1) {
                let addr = rest.split_whitespace().next().expect("an address");
                // Bound to every address: reached through loopback, as a client here would.
                let addr = addr.replace("0.0.0.0:", "127.0.0.1:");
                break format!("http://{addr}");
            }
        };
        Served {
            child,
            url,
            credential,
            network,
            jobs,
        }
    }

    /// The job dir episodes are recorded in.
    fn job(&self) -> PathBuf {
        self.jobs.path().join("served")
    }

    /// Runs the driver's `args` against this server; its output when it passed.
    fn drive(&self, command: &str, args: &[&str]) -> String {
        let out = Command::new(python())
            .arg(serve_dir().join("driver.py"))
            .arg(command)
            .arg(&self.url)
            .args(args)
            .output()
            .expect("the driver runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "driver {command} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        eprintln!("{stdout}");
        stdout
    }

    /// Every episode recorded so far: (dir name, result.json).
    fn episodes(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.job())
            .expect("the job dir")
            .flatten()
        {
            let path = entry.path().join("result.json");
            if let Ok(text) = std::fs::read_to_string(&path) {
                let value = serde_json::from_str(&text).expect("result.json is JSON");
                out.push((entry.file_name().to_string_lossy().into_owned(), value));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Asserts that no episode's container is left (each was removed as its session ended).
    fn assert_no_container_left(&self) {
        for (name, _) in self.episodes() {
            let left = containers_with_label(&format!("runner.trial={name}"));
            assert!(left.is_empty(), "episode {name} left containers {left:?}");
        }
    }

    /// Stops the server as Ctrl-C would and waits for it: exit 0.
    fn stop(mut self) -> tempfile::TempDir {
        signal(&self.child, "TERM");
        let status = self.child.wait().expect("runner serve exits");
        assert!(status.success(), "runner serve exited with {status}");
        std::mem::replace(&mut self.jobs, tempfile::tempdir().expect("a temp dir"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal(&self.child, "TERM");
            let _ = self.child.wait();
        }
    }
}

fn signal(child: &Child, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status();
}

fn reward(result: &Value) -> Option<f64> {
    result
        .pointer("/verifier_result/rewards/reward")
        .and_then(Value::as_f64)
}

#[test]
fn the_schema_is_the_terminal_bench_wrappers_field_for_field() {
    let served = Served::start(&workspace_root().join("tasks/examples"), &[]);
    let fixture = serve_dir().join("tbench2-schema.json");
    served.drive("schema", &[fixture.to_str().expect("a UTF-8 path")]);
}

#[test]
fn the_oracle_through_openenv_gives_one_and_nothing_gives_zero_recorded_as_a_job() {
    let examples = workspace_root().join("tasks/examples");
    let served = Served::start(&examples, &["--exec-timeout", "10", "--max-sessions", "10"]);
    let tasks = examples.to_str().expect("a UTF-8 path");
    let mut args = vec![tasks];
    args.extend(ORACLE_TASKS);
    let out = served.drive("oracle", &args);
    assert_eq!(
        out.matches(": reward 1.0").count(),
        ORACLE_TASKS.len(),
        "{out}"
    );
    served.drive("nothing", &["examples/hello-file"]);
    served.drive("timeout", &[tasks, "examples/slow-oracle"]);
    served.assert_no_container_left();

    let episodes = served.episodes();
    assert_eq!(episodes.len(), ORACLE_TASKS.len() + 2, "{episodes:#?}");
    for task in ORACLE_TASKS {
        // hello-file has a second episode, the empty one: the oracle's is the one of 1.
        let (name, result) = episodes
            .iter()
            .find(|(_, r)| r["task_name"] == task && reward(r) == Some(1.0))
            .unwrap_or_else(|| panic!("no episode of {task} with reward 1: {episodes:#?}"));
        assert!(result["exception_info"].is_null(), "{name}: {result:#}");
        let trajectory = served.job().join(name).join("agent/trajectory.json");
        let steps: Value = serde_json::from_slice(&std::fs::read(&trajectory).expect("ATIF"))
            .expect("ATIF is JSON");
        let calls: Vec<&str> = steps["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .filter_map(|s| s.pointer("/tool_calls/0/function_name")?.as_str())
            .collect();
        let dir = served.job().join(name);
        if task == STEPS_TASK.0 {
            assert_eq!(calls, ["exec", "evaluate", "exec", "evaluate"], "{name}");
            assert_steps_recorded(&dir, result, &STEPS_TASK.1, &[1.0, 1.0]);
        } else {
            assert_eq!(calls, ["exec", "evaluate"], "{name}");
            assert!(dir.join("verifier").is_dir(), "{name}");
        }
    }
    let zeros = episodes
        .iter()
        .filter(|(_, r)| reward(r) == Some(0.0))
        .count();
    assert_eq!(zeros, 2, "the empty and the timed-out episodes score 0");

    let jobs = served.stop();
    let job = jobs.path().join("served");
    let out = runner()
        .args(["summary", "--format", "json"])
        .arg(&job)
        .output()
        .expect("runner summary runs");
    let (stdout, _) = crate::support::exited(&out, 0);
    let summary: Value = serde_json::from_str(&stdout).expect("summary JSON");
    let text = summary.to_string();
    assert!(text.contains("examples/multi-reward"), "{summary:#}");
    let view = jobs.path().join("view");
    let out = runner()
        .arg("view")
        .arg(&job)
        .arg("--out")
        .arg(&view)
        .output()
        .expect("runner view runs");
    crate::support::exited(&out, 0);
    let pages = std::fs::read_dir(&view).expect("the report").count();
    assert!(pages > 1, "runner view wrote {pages} entries");
}

/// A multi-step episode's record is a trial's with steps: `step_results` with each step's
/// reward in order, and `steps/<name>/` with its instruction and verifier outputs.
fn assert_steps_recorded(dir: &Path, result: &Value, steps: &[&str], rewards: &[f64]) {
    let recorded: Vec<(&str, Option<f64>)> = result["step_results"]
        .as_array()
        .unwrap_or_else(|| panic!("no step_results: {result:#}"))
        .iter()
        .map(|s| {
            let name = s["step_name"].as_str().expect("a step name");
            (
                name,
                s.pointer("/verifier_result/rewards/reward")
                    .and_then(Value::as_f64),
            )
        })
        .collect();
    let expected: Vec<(&str, Option<f64>)> = steps
        .iter()
        .zip(rewards)
        .map(|(name, reward)| (*name, Some(*reward)))
        .collect();
    assert_eq!(recorded, expected, "{result:#}");
    for step in steps.iter().take(rewards.len()) {
        let step_dir = dir.join("steps").join(step);
        assert!(step_dir.join("instruction.md").is_file(), "{step_dir:?}");
        assert!(step_dir.join("verifier").is_dir(), "{step_dir:?}");
    }
}

#[test]
fn a_separate_verifier_sees_only_the_artifacts_and_a_failed_gate_stops_the_steps() {
    let served = Served::start(&workspace_root().join("tasks/examples"), &[]);
    let separate = "examples/separate-verifier";
    served.drive("nothing", &[separate]);
    // The reward file the policy plants stays in its own container.
    served.drive("planted", &[separate]);
    served.drive("gate", &[STEPS_TASK.0]);
    served.assert_no_container_left();
    let episodes = served.episodes();
    for (name, _) in &episodes {
        let left = containers_with_label(&format!("runner.trial={name}__verifier"));
        assert!(
            left.is_empty(),
            "{name}'s verifier left containers {left:?}"
        );
    }
    let of = |task: &str| -> Vec<&(String, Value)> {
        episodes
            .iter()
            .filter(|(_, r)| r["task_name"] == task)
            .collect()
    };
    let separates = of(separate);
    assert_eq!(separates.len(), 2, "{episodes:#?}");
    for (name, result) in separates {
        assert_eq!(reward(result), Some(0.0), "{name}: {result:#}");
        assert_eq!(result["verifier_environment_mode"], "separate", "{name}");
        // The verifier's outputs came back from its own container.
        let verifier = served.job().join(name).join("verifier");
        assert!(verifier.join("test-stdout.txt").is_file(), "{verifier:?}");
    }
    let [(name, gated)] = of(STEPS_TASK.0)[..] else {
        panic!("one gated episode: {episodes:#?}");
    };
    assert_eq!(reward(gated), Some(0.0), "{name}: {gated:#}");
    assert_steps_recorded(&served.job().join(name), gated, &STEPS_TASK.1, &[0.0]);
    served.stop();
}

#[test]
fn a_next_step_that_cannot_be_set_up_ends_the_episode_without_a_trial_reward() {
    let served = Served::start(&serve_dir().join("tasks"), &[]);
    served.drive("setup-fails", &["serve-fixtures/broken-step"]);
    served.assert_no_container_left();
    let episodes = served.episodes();
    let [(name, result)] = &episodes[..] else {
        panic!("one episode: {episodes:#?}");
    };
    let kind = result.pointer("/exception_info/exception_type");
    assert_eq!(
        kind.and_then(Value::as_str),
        Some("StepSetupError"),
        "{name}: {result:#}"
    );
    // As a trial's: no reward from the steps before the one that could not start.
    assert!(result["verifier_result"].is_null(), "{name}: {result:#}");
    let steps = result["step_results"].as_array().expect("step_results");
    assert_eq!(steps.len(), 2, "{result:#}");
    assert_eq!(
        steps[0]
            .pointer("/verifier_result/rewards/reward")
            .and_then(Value::as_f64),
        Some(1.0)
    );
    assert!(steps[1]["verifier_result"].is_null(), "{result:#}");
    served.stop();
}

#[test]
fn hostile_actions_end_in_errors_or_closed_episodes_and_the_server_keeps_serving() {
    let served = Served::start(
        &serve_dir().join("tasks"),
        &["--exec-timeout", "10", "--max-output-bytes", "4096"],
    );
    served.drive("hostile", &["serve-fixtures/bounded"]);
    served.assert_no_container_left();
    let ended: Vec<(String, Option<String>, Option<String>)> = served
        .episodes()
        .into_iter()
        .map(|(name, r)| {
            let text = |p: &str| r.pointer(p).and_then(Value::as_str).map(str::to_owned);
            (
                name,
                text("/exception_info/exception_type"),
                text("/exception_info/exception_message"),
            )
        })
        .collect();
    let storage = ended
        .iter()
        .filter(|(_, kind, _)| kind.as_deref() == Some("StorageLimitExceededError"))
        .count();
    // The disk filler's episode; on a loaded machine the background `yes` of the endless
    // output case may also write past storage_mb (its output file is on the container's disk)
    // before its episode closes, and is then stopped the same way.
    assert!((1..=2).contains(&storage), "{ended:#?}");
    served.stop();
}

#[test]
fn a_full_server_refuses_a_session_and_an_idle_session_is_closed() {
    let served = Served::start(
        &workspace_root().join("tasks/examples"),
        &["--max-sessions", "1", "--idle-timeout", "3"],
    );
    served.drive("capacity", &["examples/hello-file"]);
    served.assert_no_container_left();
    served.stop();
}

#[test]
fn an_episode_runs_the_collect_hooks_and_collects_a_sidecars_artifacts_as_a_trial_does() {
    // The task's tests give 1 only when main's hook wrote its file before them.
    let dataset = tempfile::tempdir().expect("a temp dir");
    let task = "fixtures/collect-hooks";
    testkit::files::copy_dir(
        &crate::step_phases::fixture("collect-hooks"),
        &dataset.path().join("collect-hooks"),
    );
    let served = Served::start(dataset.path(), &[]);
    served.drive("oracle", &[dataset.path().to_str().expect("UTF-8"), task]);
    served.assert_no_container_left();
    let episodes = served.episodes();
    let [(name, result)] = &episodes[..] else {
        panic!("one episode: {episodes:#?}");
    };
    assert_eq!(reward(result), Some(1.0), "{name}: {result:#}");
    assert!(result["exception_info"].is_null(), "{name}: {result:#}");

    // Killed before grading, the bumper cannot move the counter; the oracle waited for 5.
    crate::schema14::assert_collected_as_the_fixture_says(
        &served.job().join(name),
        "the oracle's bumper counted past 5",
    );
    served.stop();
}

/// An episode's container is readied as a trial's: the task's healthcheck runs before the
/// first action (this task's tests give 1 only when it ran, and its oracle's file is there).
#[test]
fn an_episode_runs_the_tasks_healthcheck_before_the_policy_as_a_trial_does() {
    let dataset = tempfile::tempdir().expect("a temp dir");
    testkit::files::copy_dir(
        &workspace_root().join("tests/fixtures/tasks/quick"),
        &dataset.path().join("quick"),
    );
    let served = Served::start(dataset.path(), &[]);
    served.drive(
        "oracle",
        &[dataset.path().to_str().expect("UTF-8"), "fixtures/quick"],
    );
    served.assert_no_container_left();
    let episodes = served.episodes();
    let [(name, result)] = &episodes[..] else {
        panic!("one episode: {episodes:#?}");
    };
    assert_eq!(reward(result), Some(1.0), "{name}: {result:#}");
    let log = std::fs::read_to_string(served.job().join(name).join("trial.log")).unwrap();
    assert!(log.contains("healthcheck passed"), "{log}");
    served.stop();
}

/// Issue 39: a web page cannot drive the server. A foreign `Host` (DNS rebinding) or a
/// browser's `Origin` is refused on every route and on the WebSocket handshake, by hand-made
/// requests and by the `websockets` library; the names and origin given with
/// `--allowed-host`/`--allowed-origin` are served, and so is the stock client.
#[test]
fn a_foreign_host_or_origin_is_refused_on_http_and_websocket() {
    let served = Served::start(
        &workspace_root().join("tasks/examples"),
        &[
            "--allowed-host",
            "trainer.test",
            "--allowed-origin",
            "http://trainer.test:3000",
        ],
    );
    assert_eq!(
        served.credential, None,
        "no credential on loopback by default"
    );
    served.drive("strangers", &["trainer.test", "http://trainer.test:3000"]);
    served.stop();
}

/// Issue 39: bound beyond loopback (every address; reached here through loopback, the same
/// listening socket a remote client reaches), every request needs the credential printed at
/// start: 401 without it, on HTTP and WebSocket, and for the stock client; the stock client
/// with it as user-info in its base URL runs an episode to its reward.
#[test]
fn beyond_loopback_the_credential_is_required_and_the_stock_client_sends_it_from_its_url() {
    let examples = workspace_root().join("tasks/examples");
    let served = Served::start(&examples, &["--host", "0.0.0.0"]);
    let token = served
        .credential
        .clone()
        .expect("a server beyond loopback prints its credential");
    assert_eq!(token.len(), 64, "{token}");
    let tasks = examples.to_str().expect("UTF-8");
    served.drive("credential", &[&token, tasks, "examples/hello-file"]);
    let episodes = served.episodes();
    assert_eq!(episodes.len(), 1, "{episodes:#?}");
    assert_eq!(reward(&episodes[0].1), Some(1.0), "{episodes:#?}");
    // The credential is in no record of the job.
    for (path, text) in all_files(&served.job()) {
        assert!(
            !text.contains(&token),
            "the credential is in {}",
            path.display()
        );
    }
    served.stop();
}

/// `--token-file` on loopback: the credential is required there too, and not printed.
#[test]
fn a_token_file_makes_a_loopback_server_require_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("token");
    let token = "f00dfeedf00dfeedf00dfeed";
    std::fs::write(&file, format!("{token}\n")).expect("the token file");
    let examples = workspace_root().join("tasks/examples");
    let served = Served::start(&examples, &["--token-file", file.to_str().expect("UTF-8")]);
    assert_eq!(served.credential, None, "a given credential is not printed");
    let tasks = examples.to_str().expect("UTF-8");
    served.drive("credential", &[token, tasks, "examples/hello-file"]);
    served.stop();
}

/// Issue 39: two sessions' containers cannot reach each other (each session's container on
/// a bridge where containers cannot talk to one another, not the engine's default bridge).
#[test]
fn a_session_cannot_reach_another_sessions_container() {
    let served = Served::start(&workspace_root().join("tasks/examples"), &[]);
    served.drive("isolation", &["examples/hello-file"]);
    served.assert_no_container_left();
    let network = served
        .network
        .clone()
        .expect("the server names its sessions' network");
    served.stop();
    let left = Command::new("docker")
        .args(["network", "ls", "-q", "--filter"])
        .arg(format!("name=^{network}$"))
        .output()
        .expect("docker network ls");
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "the sessions' network {network} outlived the server"
    );
}

/// Issue 39: an output over the cap comes back marked (`truncated`, the bytes dropped, a
/// marker line) on every path that cuts: 1 MB, 70 KB and `seq 1 100000` through exec, one
/// written to stderr, and a background process's view.
#[test]
fn a_megabyte_of_output_comes_back_marked() {
    let served = Served::start(&workspace_root().join("tasks/examples"), &[]);
    served.drive("long-output", &["examples/hello-file"]);
    served.assert_no_container_left();
    served.stop();
}

/// Every file under `dir` with its text (lossy).
fn all_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(all_files(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    out
}
