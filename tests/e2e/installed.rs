//! Installed agents against the real Docker engine: the reference agent on the examples,
//! cancel at the deadline, broken servers, dirty sources, the secret boundary, and many
//! concurrent trials whose servers share one port number.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{
    Job, containers_with_label, ensure_base_image, exception, git, reward, runner, workspace_root,
};

fn reference_config() -> PathBuf {
    workspace_root().join("adapter/agents/reference/agent.toml")
}

/// `runner run` of `config` on the task or dataset at `rel` (relative to the workspace) with
/// `extra` flags; returns the exit code and stderr (also echoed for the test log).
pub(crate) fn run(jobs: &Path, rel: &str, config: &Path, extra: &[&str]) -> (i32, String) {
    ensure_base_image();
    let assert = runner()
        .args(["run", "--jobs-dir"])
        .arg(jobs)
        .arg("--path")
        .arg(workspace_root().join(rel))
        .arg("--agent-config")
        .arg(config)
        .args(extra)
        .timeout(Duration::from_secs(900))
        .assert();
    let out = assert.get_output();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

/// A finished `runner run` in a jobs dir of its own (removed when this is dropped).
struct Ran {
    jobs: tempfile::TempDir,
    code: i32,
}

impl Ran {
    /// The run's job directory.
    fn job(&self) -> Job {
        Job::single_in(self.jobs.path())
    }
}

/// [`run`] of `config` into a fresh jobs dir.
fn run_fresh(rel: &str, config: &Path, extra: &[&str]) -> Ran {
    let jobs = tempfile::tempdir().unwrap();
    let (code, _) = run(jobs.path(), rel, config, extra);
    Ran { jobs, code }
}

/// [`run`] of the reference agent into a fresh jobs dir.
fn run_reference(rel: &str, extra: &[&str]) -> Ran {
    run_fresh(rel, &reference_config(), extra)
}

#[test]
fn reference_agent_solves_the_examples_with_valid_trajectories_and_provenance() {
    // k=1: every check below is per trial, and the provenance comparison spans the ten
    // trials (and a second run) already.
    let ran = run_reference("tasks/examples", &["--k", "1"]);
    assert_eq!(ran.code, 0);
    let job = ran.job();
    let config = job.json("config.json");
    assert_eq!(config["agents"][0]["name"], "reference-agent");
    let mut provenance: Option<String> = None;
    let results = job.trial_results();
    let examples = std::fs::read_dir(workspace_root().join("tasks/examples"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("task.toml").is_file())
        .count();
    assert_eq!(results.len(), examples, "a trial of every example");
    for (name, result) in results {
        assert_eq!(
            result["agent_info"]["name"], config["agents"][0]["name"],
            "{name}"
        );
        let task = result["task_name"].as_str().unwrap();
        if task.ends_with("slow-oracle") {
            assert_eq!(
                exception(&result).as_deref(),
                Some("AgentTimeoutError"),
                "{name}"
            );
            assert_eq!(reward(&result), Some(0.0), "{name}");
        } else {
            assert_eq!(
                exception(&result),
                None,
                "{name}: {}",
                result["exception_info"]
            );
            assert_eq!(reward(&result), Some(1.0), "{name}");
        }
        let trajectory = job.dir.join(&name).join("agent/trajectory.json");
        if reward(&result).unwrap_or(0.0) > 0.0 {
            let errors = tasks::atif::validate_file(&trajectory).expect("trajectory readable");
            assert!(errors.is_empty(), "{name}: {errors:?}");
        }
        // A multi-step trial sends each step's instruction; the first step's is checked.
        let task_dir = workspace_root()
            .join("tasks/examples")
            .join(task.rsplit('/').next().unwrap());
        let (sent, source) = match result["step_results"][0]["step_name"].as_str() {
            Some(step) => (
                format!("steps/{step}/agent/instruction.txt"),
                task_dir.join("steps").join(step).join("instruction.md"),
            ),
            None => (
                "agent/instruction.txt".to_owned(),
                task_dir.join("instruction.md"),
            ),
        };
        let instruction = job.trial_file(&name, &sent);
        let original = std::fs::read_to_string(source).unwrap();
        assert!(
            original.contains(instruction.trim()),
            "{name}: the instruction was sent verbatim"
        );
        let record = job.trial_file(&name, "agent/source-provenance.json");
        match &provenance {
            None => provenance = Some(record),
            Some(first) => assert_eq!(first, &record, "{name}: provenance differs between trials"),
        }
    }
    // A second run of the same tree records the same provenance.
    let ran2 = run_reference("tasks/examples/hello-file", &["--k", "1"]);
    assert_eq!(ran2.code, 0);
    let job2 = ran2.job();
    let (name, _) = &job2.trial_results()[0];
    let again = job2.trial_file(name, "agent/source-provenance.json");
    assert_eq!(
        provenance.unwrap(),
        again,
        "provenance identical across runs of the same tree"
    );
}

#[test]
fn agent_deadline_cancels_the_task_and_still_verifies() {
    let ran = run_reference("tasks/examples/slow-oracle", &["--k", "1"]);
    assert_eq!(ran.code, 0, "the timed-out trial is still scored");
    let job = ran.job();
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result).as_deref(), Some("AgentTimeoutError"));
    assert!(
        result["verifier_result"]["rewards"].is_object(),
        "{name}: verified after the timeout"
    );
    let server_log = job.trial_file(name, "agent/server.log");
    assert!(
        server_log.contains("/cancel"),
        "the runner POSTed cancel: {server_log}"
    );
}

#[test]
fn a_server_that_crashes_on_start_is_an_agent_error_with_its_log() {
    let config = workspace_root().join("tests/fixtures/agents/crash-on-start/agent.toml");
    let ran = run_fresh("tests/fixtures/tasks/quick", &config, &["--k", "1"]);
    assert_eq!(
        ran.code, 0,
        "an agent error is a result (0), not missing data"
    );
    let job = ran.job();
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result).as_deref(), Some("AgentServerError"));
    assert_eq!(result["outcome"], "agent_error");
    assert_eq!(result["attempts"], 1, "agent errors are not retried");
    let log = job.trial_file(name, "agent/server.log");
    assert!(
        log.contains("cannot load model weights"),
        "server log saved: {log}"
    );
    assert!(containers_with_label(&format!("runner.job={}", job.job_id())).is_empty());
}

#[test]
fn a_server_that_never_becomes_healthy_fails_setup_in_time() {
    let config = workspace_root().join("tests/fixtures/agents/never-healthy/agent.toml");
    // 360 s × 0.05 = 18 s setup deadline.
    let ran = run_fresh(
        "tests/fixtures/tasks/quick",
        &config,
        &["--k", "1", "--agent-setup-timeout-multiplier", "0.05"],
    );
    assert_eq!(
        ran.code, 0,
        "an agent error is a result (0), not missing data"
    );
    let job = ran.job();
    let (name, result) = &job.trial_results()[0];
    let kind = exception(result).unwrap();
    assert!(
        kind == "AgentServerError" || kind == "AgentSetupTimeoutError",
        "{name}: {kind}"
    );
    assert_eq!(result["outcome"], "agent_error");
    let log = job.trial_file(name, "agent/server.log");
    assert!(log.contains("warming up forever"), "{log}");
}

/// Copies the reference agent into a git repo of its own and returns the config path.
fn reference_agent_in_git_repo(root: &Path) -> PathBuf {
    let src = workspace_root().join("adapter/agents/reference");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(root.join("agent"))
        .status()
        .unwrap();
    assert!(status.success());
    let repo = root.join("agent");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "agent"]);
    repo.join("agent.toml")
}

#[test]
fn a_dirty_source_tree_is_recorded_and_can_be_refused() {
    let root = tempfile::tempdir().unwrap();
    let config = reference_agent_in_git_repo(root.path());
    let plan = config.parent().unwrap().join("src/plan.json");
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(&plan, format!("{text}\n")).unwrap();
    std::fs::write(
        config.parent().unwrap().join("src/notes.txt"),
        "untracked scratch\n",
    )
    .unwrap();

    let jobs = tempfile::tempdir().unwrap();
    let (code, stderr) = run(
        jobs.path(),
        "tests/fixtures/tasks/quick",
        &config,
        &["--k", "1", "--require-clean-source"],
    );
    assert_eq!(
        code, 2,
        "--require-clean-source refuses a dirty tree: {stderr}"
    );
    assert!(
        std::fs::read_dir(jobs.path())
            .map(|d| d.count())
            .unwrap_or(0)
            == 0,
        "nothing ran"
    );

    let (_, stderr) = run(
        jobs.path(),
        "tests/fixtures/tasks/quick",
        &config,
        &["--k", "1"],
    );
    assert!(
        stderr.contains("uncommitted"),
        "the summary shows the dirty state: {stderr}"
    );
    let job = Job::single_in(jobs.path());
    let (name, _) = &job.trial_results()[0];
    let record = job.json(&format!("{name}/agent/source-provenance.json"));
    let text = record.to_string();
    assert!(text.contains("\"dirty\":true"), "{text}");
    assert!(
        !text.contains("untracked scratch") && !text.contains("notes.txt"),
        "no contents or untracked names: {text}"
    );
}

#[test]
fn the_secret_boundary_refuses_a_planted_key_unless_opted_in() {
    let key = "sk-ant-api03-PLANTEDplantedPLANTEDplanted0123456789";
    let jobs = tempfile::tempdir().unwrap();
    let quick = "tests/fixtures/tasks/quick";
    let env = format!("ANTHROPIC_API_KEY={key}");
    let (code, stderr) = run(
        jobs.path(),
        quick,
        &reference_config(),
        &["--k", "1", "--agent-env", &env],
    );
    assert_eq!(code, 2);
    testkit::assert_names_but_hides(&stderr, &["ANTHROPIC_API_KEY"], key);

    let (_, stderr) = run(
        jobs.path(),
        quick,
        &reference_config(),
        &["--k", "1", "--agent-env", &env, "--allow-container-secrets"],
    );
    assert!(!stderr.contains(key));
    let job = Job::single_in(jobs.path());
    assert_eq!(job.json("config.json")["allow_container_secrets"], true);
    assert_eq!(job.json("lock.json")["allow_container_secrets"], true);
    for file in ["config.json", "lock.json"] {
        let text = std::fs::read_to_string(job.dir.join(file)).unwrap();
        assert!(!text.contains(key), "{file} holds the key");
    }
}

#[test]
fn many_concurrent_trials_whose_servers_share_a_port() {
    let ran = run_reference(
        "tasks/examples/hello-file",
        &["--k", "6", "--n-concurrent", "6"],
    );
    assert_eq!(ran.code, 0);
    let job = ran.job();
    let results = job.trial_results();
    assert_eq!(results.len(), 6);
    for (name, result) in &results {
        assert_eq!(
            reward(result),
            Some(1.0),
            "{name}: {}",
            result["exception_info"]
        );
    }
}
