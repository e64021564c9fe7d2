//! Long runs that survive: `kill -9` at three moments of a k=5 job and `--resume` after each,
//! raising k, a real container start failure retried, a paused runner, and a resume refused
//! because the agent changed. Against the real Docker engine.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::files::copy_dir;

use crate::support::{
    containers_with_label, ensure_base_image, exited, runner, runner_bin, workspace_root,
};

fn reference_config() -> PathBuf {
    workspace_root().join("adapter/agents/reference/agent.toml")
}

/// Starts the runner binary with `args`; its output goes to `<logs>/<n>.{out,err}`.
fn spawn(args: &[OsString], logs: &Path, n: usize) -> Child {
    let out = std::fs::File::create(logs.join(format!("{n}.out"))).unwrap();
    let err = std::fs::File::create(logs.join(format!("{n}.err"))).unwrap();
    Command::new(runner_bin())
        .args(args)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("the runner starts")
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// A test's temporary root and its logs dir, the base image ensured.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    ensure_base_image();
    let root = tempfile::tempdir().unwrap();
    let logs = logs_dir(root.path());
    (root, logs)
}

/// `<root>/logs`, created, for [`spawn`]'s output files.
fn logs_dir(root: &Path) -> PathBuf {
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    logs
}

/// Waits for `child` to exit within `limit`; returns its code and what it printed.
fn finish(mut child: Child, logs: &Path, n: usize, limit: Duration) -> (i32, String) {
    let deadline = Instant::now() + limit;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("run {n} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = format!(
        "{}\n{}",
        std::fs::read_to_string(logs.join(format!("{n}.out"))).unwrap_or_default(),
        std::fs::read_to_string(logs.join(format!("{n}.err"))).unwrap_or_default()
    );
    (code, text)
}

/// `result.json` bytes of every complete trial (direct children of the job dir).
fn complete(job: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(job) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if let Ok(bytes) = std::fs::read(entry.path().join("result.json")) {
            out.insert(name, bytes);
        }
    }
    out
}

/// True when some trial's log shows it inside the agent phase and it has no result yet.
fn a_trial_is_running_its_agent(job: &Path) -> bool {
    std::fs::read_dir(job)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            !e.path().join("result.json").exists()
                && std::fs::read_to_string(e.path().join("trial.log"))
                    .is_ok_and(|log| log.contains("phase: running agent started"))
        })
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Polls `ready` until it holds or `child` exits (a failure) or five minutes pass.
fn wait_for(child: &mut Child, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !ready() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the runner exited before {what}"
        );
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// After a kill, the job dir reads as a job: its records parse, complete trials' records
/// parse, and every record seen complete before is byte-identical.
fn check_after_kill(job: &Path, seen: &mut BTreeMap<String, Vec<u8>>, moment: &str) {
    for record in ["config.json", "lock.json", "result.json"] {
        json(&job.join(record));
    }
    let now = complete(job);
    for (trial, bytes) in seen.iter() {
        assert_eq!(
            now.get(trial),
            Some(bytes),
            "{moment}: the result.json of {trial}, complete before, changed or vanished"
        );
    }
    for (trial, bytes) in &now {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .unwrap_or_else(|e| panic!("{moment}: {trial}/result.json: {e}"));
    }
    seen.extend(now);
}

#[test]
fn kill_9_at_three_moments_then_resume_finishes_a_k5_job_with_every_record_kept() {
    let (root, logs) = scratch();
    let jobs = root.path().join("jobs");
    let job = jobs.join("kill9");
    let mut flags = os(&["run", "--path"]);
    flags.push(workspace_root().join("tasks/examples").into());
    flags.push("--agent-config".into());
    flags.push(reference_config().into());
    flags.extend(os(&["--k", "5", "--n-concurrent", "4"]));
    let mut first = flags.clone();
    first.extend(os(&[
        "--jobs-dir",
        jobs.to_str().unwrap(),
        "--job-name",
        "kill9",
    ]));
    let mut resume = flags.clone();
    resume.extend(os(&["--resume", job.to_str().unwrap()]));
    let mut seen = BTreeMap::new();

    // Moment 1: trials are inside their agent phase and none is complete yet.
    let mut child = spawn(&first, &logs, 1);
    wait_for(&mut child, "a trial's agent phase", || {
        a_trial_is_running_its_agent(&job)
    });
    child.kill().unwrap();
    child.wait().unwrap();
    check_after_kill(&job, &mut seen, "moment 1");
    let after_first = seen.len();

    // Moment 2: mid-job, four more trials complete and others in flight.
    let mut child = spawn(&resume, &logs, 2);
    wait_for(&mut child, "four more complete trials", || {
        complete(&job).len() >= after_first + 4 && a_trial_is_running_its_agent(&job)
    });
    // While it runs, a second runner on the same job dir is refused.
    let second = runner()
        .args(["jobs", "resume", "-p"])
        .arg(&job)
        .output()
        .unwrap();
    let (_, stderr) = exited(&second, 2);
    assert!(stderr.contains("in use by another runner"), "{stderr}");
    child.kill().unwrap();
    child.wait().unwrap();
    check_after_kill(&job, &mut seen, "moment 2");
    let after_second = seen.len();

    // Moment 3: the instant a trial's result lands, with its neighbours mid-phase; resumed
    // the way Harbor spells it.
    let job_arg = job.to_str().unwrap();
    let mut child = spawn(&os(&["jobs", "resume", "-p", job_arg]), &logs, 3);
    wait_for(&mut child, "one more complete trial", || {
        complete(&job).len() > after_second
    });
    child.kill().unwrap();
    child.wait().unwrap();
    check_after_kill(&job, &mut seen, "moment 3");

    let child = spawn(&os(&["jobs", "resume", "-p", job_arg]), &logs, 4);
    let (code, output) = finish(child, &logs, 4, Duration::from_secs(600));
    assert_eq!(code, 0, "{output}");
    check_after_kill(&job, &mut seen, "the end");

    // Every task has exactly five trials, each a direct child with a result.
    let mut per_task: BTreeMap<String, usize> = BTreeMap::new();
    let mut with_attempts = 0;
    for entry in std::fs::read_dir(&job).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            !name.starts_with('.') || name == ".runner.lock",
            "a staging dir or temp file was left: {name}"
        );
        if !entry.path().is_dir() {
            continue;
        }
        let result = json(&entry.path().join("result.json"));
        *per_task
            .entry(result["task_name"].as_str().unwrap().to_owned())
            .or_default() += 1;
        if entry.path().join("attempts/1").is_dir() {
            with_attempts += 1;
            assert!(result["attempts"].as_u64().unwrap() >= 2, "{name}");
        }
    }
    let examples = std::fs::read_dir(workspace_root().join("tasks/examples"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("task.toml").is_file())
        .count();
    assert_eq!(per_task.len(), examples, "{per_task:?}");
    assert!(per_task.values().all(|n| *n == 5), "{per_task:?}");
    assert!(
        with_attempts > 0,
        "trials killed mid-run were re-run with the partial attempt kept"
    );
    let result = json(&job.join("result.json"));
    let trials = examples * 5;
    assert_eq!(result["n_total_trials"], trials);
    assert_eq!(result["coverage"]["scored"], trials);
    assert_eq!(result["stats"]["n_completed_trials"], trials);
    assert!(result["finished_at"].is_string());
    assert_eq!(
        json(&job.join("lock.json"))["trials"]
            .as_array()
            .unwrap()
            .len(),
        trials
    );
    let log = std::fs::read_to_string(job.join("job.log")).unwrap();
    assert_eq!(log.matches(" resumed: ").count(), 3, "{log}");
    assert!(
        containers_with_label(&format!("runner.job={}", result["id"].as_str().unwrap())).is_empty(),
        "the killed runs' containers were reaped"
    );

    let validate = runner()
        .arg("validate-submission")
        .arg(&job)
        .arg("--dataset")
        .arg(workspace_root().join("tasks/examples"))
        .output()
        .unwrap();
    exited(&validate, 0);

    // A resume with a changed agent config is refused, naming the change, and runs nothing.
    let agent = root.path().join("agent");
    testkit::files::copy_dir(&workspace_root().join("adapter/agents/reference"), &agent);
    let toml = std::fs::read_to_string(agent.join("agent.toml")).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        toml.replace("reasoning_effort = \"none\"", "reasoning_effort = \"high\""),
    )
    .unwrap();
    let refused = runner()
        .args(["run", "--path"])
        .arg(workspace_root().join("tasks/examples"))
        .arg("--agent-config")
        .arg(agent.join("agent.toml"))
        .args(["--k", "5", "--resume"])
        .arg(&job)
        .output()
        .unwrap();
    let (_, stderr) = exited(&refused, 2);
    assert!(
        stderr.contains("agents[0].kwargs.reasoning_effort: \"none\" in the job, \"high\" now"),
        "{stderr}"
    );
    assert_eq!(complete(&job), seen, "a refused resume touches nothing");
}

/// A container that holds a name, removed when the test ends whatever happens.
struct Squatter(String);

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn oracle_quick(extra: &[&str]) -> assert_cmd::assert::Assert {
    runner()
        .args(["run", "--agent", "oracle", "--path"])
        .arg(workspace_root().join("tests/fixtures/tasks/quick"))
        .args(extra)
        .timeout(Duration::from_secs(300))
        .assert()
}

#[test]
fn raising_k_adds_only_the_missing_trials_and_a_real_start_failure_is_retried() {
    ensure_base_image();
    let root = tempfile::tempdir().unwrap();
    let jobs = root.path().to_str().unwrap().to_owned();
    let a = root.path().join("a");
    let out = oracle_quick(&["--k", "1", "--jobs-dir", &jobs, "--job-name", "a"]);
    exited(out.get_output(), 0);
    let before = complete(&a);
    assert_eq!(before.len(), 1);
    let out = oracle_quick(&["--k", "2", "--resume", a.to_str().unwrap()]);
    exited(out.get_output(), 0);
    let after = complete(&a);
    assert_eq!(after.len(), 2, "k 1 → 2 adds exactly one trial");
    let (first, bytes) = before.iter().next().unwrap();
    assert_eq!(
        after.get(first),
        Some(bytes),
        "the first trial is untouched"
    );
    assert_eq!(json(&a.join("config.json"))["n_attempts"], 2);
    assert_eq!(json(&a.join("result.json"))["n_total_trials"], 2);
    let second = after.keys().find(|k| *k != first).unwrap().clone();

    // Trial names come from trial identities, so a second job of the same settings plans the
    // same names: the test can occupy the container name of its second trial before it runs.
    let b = root.path().join("b");
    let out = oracle_quick(&["--k", "1", "--jobs-dir", &jobs, "--job-name", "b"]);
    exited(out.get_output(), 0);
    assert_eq!(complete(&b).keys().collect::<Vec<_>>(), vec![first]);
    let job_id = json(&b.join("result.json"))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let image = json(&b.join("lock.json"))["images"]["fixtures/quick"]
        .as_str()
        .unwrap()
        .to_owned();
    let name = format!("runner-{}-{}", &job_id[..8], second.to_ascii_lowercase());
    let created = Command::new("docker")
        .args(["create", "--name", &name, &image, "true"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let squatter = Squatter(name);

    let logs = logs_dir(root.path());
    let mut args = os(&["run", "--agent", "oracle", "--path"]);
    args.push(workspace_root().join("tests/fixtures/tasks/quick").into());
    args.extend(os(&[
        "--k",
        "2",
        "--max-retries",
        "3",
        "--resume",
        b.to_str().unwrap(),
    ]));
    let mut child = spawn(&args, &logs, 1);
    wait_for(&mut child, "the first failed start", || {
        b.join(&second).join("attempts/1").is_dir()
    });
    drop(squatter);
    let (code, output) = finish(child, &logs, 1, Duration::from_secs(300));
    assert_eq!(code, 0, "{output}");
    let result = json(&b.join(&second).join("result.json"));
    assert_eq!(result["outcome"], "scored", "{result}");
    assert_eq!(result["verifier_result"]["rewards"]["reward"], 1.0);
    assert!(result["attempts"].as_u64().unwrap() >= 2);
    let failed = json(&b.join(&second).join("attempts/1/result.json"));
    assert_eq!(
        failed["exception_info"]["exception_type"],
        "EnvironmentStartError"
    );
    assert_eq!(failed["outcome"], "infra_error");
    let log = std::fs::read_to_string(b.join("job.log")).unwrap();
    assert!(
        log.contains(&format!("retry: trial {second} attempt 1")),
        "{log}"
    );
    assert_eq!(
        json(&b.join("result.json"))["stats"]["n_retries"],
        result["attempts"].as_u64().unwrap() - 1
    );
}

#[test]
fn a_paused_runner_records_the_pause_and_retries_the_timeout_it_caused() {
    let (root, logs) = scratch();
    let job = root.path().join("paused");
    // slow-oracle with a 10 s agent timeout instead of 5 s: on a loaded machine the runner
    // may be stopped a few seconds into the agent phase, and the timeout must still fall
    // inside the pause.
    let task = root.path().join("slow-oracle");
    copy_dir(&workspace_root().join("tasks/examples/slow-oracle"), &task);
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    assert!(toml.contains("timeout_sec = 5.0"), "{toml}");
    std::fs::write(
        task.join("task.toml"),
        toml.replace("timeout_sec = 5.0", "timeout_sec = 10.0"),
    )
    .unwrap();
    let mut args = os(&["run", "--agent", "oracle", "--path"]);
    args.push(task.into());
    args.extend(os(&[
        "--jobs-dir",
        root.path().to_str().unwrap(),
        "--job-name",
        "paused",
    ]));
    let mut child = spawn(&args, &logs, 1);
    wait_for(&mut child, "the agent phase", || {
        a_trial_is_running_its_agent(&job)
    });
    let pid = child.id() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Longer than the task's 10 s agent timeout and the detector's threshold.
    std::thread::sleep(Duration::from_secs(14));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let (code, output) = finish(child, &logs, 1, Duration::from_secs(300));
    assert_eq!(code, 0, "{output}");
    let (name, _) = complete(&job).into_iter().next().unwrap();
    let paused = json(&job.join(&name).join("attempts/1/result.json"));
    let log = std::fs::read_to_string(job.join("job.log")).unwrap();
    assert_eq!(
        paused["exception_info"]["exception_type"], "RunnerPausedError",
        "{paused}\n{log}"
    );
    assert_eq!(paused["outcome"], "infra_error", "{paused}");
    assert!(
        paused["pauses"][0]["seconds"].as_f64().unwrap() >= 5.0,
        "{paused}"
    );
    let result = json(&job.join(&name).join("result.json"));
    assert_eq!(
        result["exception_info"]["exception_type"], "AgentTimeoutError",
        "{result}\n{log}"
    );
    assert_eq!(result["outcome"], "scored", "{result}");
    assert_eq!(result["attempts"], 2, "{result}\n{log}");
    assert!(log.contains("the runner was paused for"), "{log}");
}

#[test]
fn resume_alone_replays_the_recorded_flags_and_a_record_that_cannot_be_moved_exits_4() {
    ensure_base_image();
    let root = tempfile::tempdir().unwrap();
    let jobs = root.path().to_str().unwrap().to_owned();
    let job = root.path().join("j");
    let out = oracle_quick(&["--k", "2", "--jobs-dir", &jobs, "--job-name", "j"]);
    exited(out.get_output(), 0);
    let before = complete(&job);
    assert_eq!(before.len(), 2);

    // A trial lost its record (killed inside it): `--resume` alone runs it with the job's
    // own flags (k 2, the oracle, the quick task) and leaves the other untouched.
    let (lost, kept) = {
        let mut names = before.keys();
        (names.next().unwrap().clone(), names.next().unwrap().clone())
    };
    std::fs::remove_file(job.join(&lost).join("result.json")).unwrap();
    let out = runner()
        .args(["run", "--resume", job.to_str().unwrap()])
        .assert();
    let (_, stderr) = exited(out.get_output(), 0);
    assert!(stderr.contains("with its recorded invocation"), "{stderr}");
    let after = complete(&job);
    assert_eq!(after.len(), 2, "the lost trial ran again: {after:?}");
    assert_eq!(
        after.get(&kept),
        before.get(&kept),
        "the kept trial is untouched"
    );

    // A flag the replay would drop is refused by name, before anything runs.
    let out = runner()
        .args([
            "run",
            "--resume",
            job.to_str().unwrap(),
            "--n-concurrent",
            "8",
        ])
        .assert();
    let (_, stderr) = exited(out.get_output(), 2);
    assert!(
        stderr.contains("--n-concurrent would be ignored"),
        "{stderr}"
    );

    // A record the file system will not move is the runner's failure (4), not bad input (2):
    // the trial to run again cannot be set aside, as its staging path is a file.
    let trial = job.join(&kept);
    std::fs::remove_file(trial.join("result.json")).unwrap();
    std::fs::write(job.join(format!(".{kept}.retiring")), b"not a directory").unwrap();
    let out = runner()
        .args(["run", "--resume", job.to_str().unwrap()])
        .assert();
    let (_, stderr) = exited(out.get_output(), 4);
    assert!(stderr.contains(&trial.display().to_string()), "{stderr}");
}
