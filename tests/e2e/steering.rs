//! Choosing what runs and how it is shown, against the real Docker engine: task selection
//! (`-i/-x/-l`), a job's own config.json run again with `-c` (same trials, same names), config
//! files in TOML and YAML, `RUNNER_*` variables, `--progress lines`, `--format json`,
//! `tasks digest --format json`, the intervals in result.json, and a job config Harbor 0.26
//! wrote.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::support::{Job, ensure_base_image, runner, workspace_root};

fn examples() -> std::path::PathBuf {
    workspace_root().join("tasks/examples")
}

/// The example tasks' directory names, in name order.
fn example_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("task.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Trial names (directory names) of a job.
fn trial_names(job: &Job) -> BTreeSet<String> {
    job.trial_results()
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

fn identities(job: &Job) -> BTreeSet<String> {
    job.trial_results()
        .into_iter()
        .map(|(_, r)| r["config"]["identity"]["key"].as_str().unwrap().to_owned())
        .collect()
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `runner run <args…> --jobs-dir <jobs> --path tasks/examples`, given `secs` to finish.
fn run_on_examples(args: &[&str], jobs: &Path, secs: u64) -> std::process::Output {
    runner()
        .arg("run")
        .args(args)
        .arg("--jobs-dir")
        .arg(jobs)
        .arg("--path")
        .arg(examples())
        .timeout(Duration::from_secs(secs))
        .output()
        .unwrap()
}

/// `runner run -c <first>/config.json` into a sibling job `again`, which must plan the same
/// trials: the same names and the same identities.
fn run_again(first: &Job) -> Job {
    let output = runner()
        .arg("run")
        .arg("-c")
        .arg(first.dir.join("config.json"))
        .args(["--job-name", "again", "--progress", "none"])
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let again = Job {
        dir: first.dir.parent().unwrap().join("again"),
    };
    assert_eq!(trial_names(&again), trial_names(first));
    assert_eq!(identities(&again), identities(first));
    again
}

#[test]
fn selection_then_the_jobs_own_config_runs_the_same_trials_again() {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let output = run_on_examples(
        &[
            "--agent",
            "oracle",
            "-k",
            "2",
            "--job-name",
            "first",
            "-i",
            "examples/hello-*",
            "-i",
            "no-net*",
            "-i",
            "multi-reward",
            "-x",
            "*multi*",
            "--progress",
            "lines",
            "--format",
            "json",
        ],
        jobs.path(),
        600,
    );
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // --format json: the summary document on stdout, nothing else.
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON document: {e}\n{stderr}"));
    assert_eq!(summary["n_finished"], 4, "{summary}");
    // --progress lines: job.log's own lines (one renderer), each finished trial's with the
    // progress after it; no phase lines.
    let finished: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(": scored, reward ") && l.contains(" mean so far "))
        .collect();
    assert_eq!(finished.len(), 4, "{stderr}");
    let job_log = std::fs::read_to_string(jobs.path().join("first/job.log")).unwrap();
    for line in &finished {
        let stamp = line.split(' ').next().unwrap();
        assert!(
            stamp.len() == 24 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "no timestamp: {line}"
        );
        let words = line.rsplit_once("  [").unwrap().0;
        assert!(
            job_log.lines().any(|l| l == words),
            "the finished line is job.log's, word for word and to the millisecond: {words}\n{job_log}"
        );
    }
    for event in job_log.lines().filter(|l| l.contains(": started")) {
        assert!(
            stderr.lines().any(|l| l == event),
            "{event} not in\n{stderr}"
        );
    }
    assert!(!stderr.contains(": agent run"), "{stderr}");

    let first = Job {
        dir: jobs.path().join("first"),
    };
    let names = trial_names(&first);
    assert_eq!(names.len(), 4);
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("hello-file__") || n.starts_with("no-network__")),
        "{names:?}"
    );
    let config = first.json("config.json");
    assert_eq!(
        config["datasets"][0]["task_names"],
        serde_json::json!(["examples/hello-*", "no-net*", "multi-reward"])
    );
    assert_eq!(
        config["datasets"][0]["exclude_task_names"],
        serde_json::json!(["*multi*"])
    );
    // The intervals, runner-only, next to Harbor's fields.
    let result = first.json("result.json");
    let eval = crate::support::only_eval(&result);
    assert_eq!(
        eval["intervals"]["mean"]["value"],
        eval["metrics"][0]["mean"]
    );
    assert_eq!(eval["intervals"]["n_tasks"], 2);
    assert!(eval["intervals"]["mean"]["low"].is_number(), "{eval}");

    // The job's own config.json, into another job: the same trials by identity and name.
    let again = run_again(&first);
    assert_eq!(trial_names(&again), names);
    assert_eq!(
        again.json("config.json")["datasets"][0]["task_names"],
        config["datasets"][0]["task_names"]
    );
}

#[test]
fn toml_and_yaml_configs_with_env_and_flags_over_them() {
    ensure_base_image();
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let toml = dir.path().join("job.toml");
    std::fs::write(
        &toml,
        format!(
            "n_attempts = 3\nn_concurrent_trials = 2\n[[agents]]\nname = \"oracle\"\n[[datasets]]\npath = {:?}\nn_tasks = 2\n",
            examples().display().to_string()
        ),
    )
    .unwrap();
    // -k on the command line beats the file's n_attempts; RUNNER_JOBS_DIR gives the jobs dir.
    let output = runner()
        .args(["run", "-c"])
        .arg(&toml)
        .args(["-k", "1", "--job-name", "t", "-q"])
        .env("RUNNER_JOBS_DIR", &jobs)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("job "), "--quiet drops notes: {stderr}");
    let job = Job {
        dir: jobs.join("t"),
    };
    let names = trial_names(&job);
    // The first two tasks in name order, once each.
    assert_eq!(names.len(), 2, "{names:?}");
    for first in &example_names()[..2] {
        assert!(
            names.iter().any(|n| n.starts_with(&format!("{first}__"))),
            "{names:?}"
        );
    }
    let config = job.json("config.json");
    assert_eq!(
        (
            config["n_attempts"].as_u64(),
            config["n_concurrent_trials"].as_u64()
        ),
        (Some(1), Some(2))
    );

    let yaml = dir.path().join("job.yaml");
    std::fs::write(
        &yaml,
        format!(
            "agents:\n  - {{name: nop}}\ndatasets:\n  - path: {}\n    task_names: [hello-file]\nenvironment:\n  override_cpus: 4\n",
            examples().display()
        ),
    )
    .unwrap();
    let output = runner()
        .args(["run", "-c"])
        .arg(&yaml)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("job.yaml: environment.override_cpus: 4 is not supported"),
        "{stderr}"
    );
}

#[test]
fn a_pattern_that_matches_nothing_is_refused_naming_the_flag() {
    let jobs = tempfile::tempdir().unwrap();
    for (flag, pattern) in [("-i", "hello-fiel"), ("-x", "nonexistent-*")] {
        let output = run_on_examples(&["--agent", "nop", flag, pattern], jobs.path(), 60);
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        let long = if flag == "-i" {
            "--include-task-name"
        } else {
            "--exclude-task-name"
        };
        assert!(
            stderr.contains(&format!(
                "{long} \"{pattern}\" matches no task of the {}",
                example_names().len()
            )),
            "{stderr}"
        );
    }
    assert!(
        std::fs::read_dir(jobs.path()).unwrap().next().is_none(),
        "nothing was written"
    );
}

#[test]
fn tasks_digest_as_json_matches_the_text_form() {
    let path: &Path = &examples();
    let text = runner()
        .args(["tasks", "digest"])
        .arg(path)
        .output()
        .unwrap();
    let json = runner()
        .args(["tasks", "digest", "--format", "json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(text.status.success() && json.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["schema"], "runner.digest/v1");
    let text = String::from_utf8(text.stdout).unwrap();
    for task in doc["tasks"].as_array().unwrap() {
        let line = format!(
            "{}  {}",
            task["digest"].as_str().unwrap(),
            task["name"].as_str().unwrap()
        );
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    let dataset = format!(
        "{}  examples/runner-examples (dataset)",
        doc["dataset"]["digest"].as_str().unwrap()
    );
    assert!(text.contains(&dataset), "{text}");
}

#[test]
fn an_installed_agents_job_config_runs_the_same_agent_again() {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let agent = workspace_root().join("adapter/agents/reference/agent.toml");
    let output = run_on_examples(
        &[
            "-i",
            "hello-file",
            "--job-name",
            "first",
            "--progress",
            "none",
            "--agent-config",
            agent.to_str().unwrap(),
        ],
        jobs.path(),
        600,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let first = Job {
        dir: jobs.path().join("first"),
    };
    let config = first.json("config.json");
    assert_eq!(
        config["agent_config"].as_str().map(Path::new),
        Some(agent.as_path()),
        "the agent's config file is recorded, runner-only"
    );
    run_again(&first);
}

/// A job config Harbor 0.26 wrote through its own models (tests/fixtures/harbor-0.26, made by
/// scripts/harbor-026-job-config.py) runs with `-c`: every field it has is read, and the job
/// is the one it describes. Only the dataset path is pointed at this checkout.
#[test]
fn a_config_written_by_harbor_0_26_runs() {
    ensure_base_image();
    let dir = tempfile::tempdir().unwrap();
    let fixture = workspace_root().join("tests/fixtures/harbor-0.26/config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    assert_eq!(config["schema_version"], 1, "a 0.26 config: {config}");
    config["datasets"][0]["path"] = examples().display().to_string().into();
    config["jobs_dir"] = dir.path().join("jobs").display().to_string().into();
    let file = dir.path().join("config.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let output = runner()
        .args(["run", "-c"])
        .arg(&file)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let job = Job {
        dir: dir.path().join("jobs/harbor-026"),
    };
    let results = job.trial_results();
    assert_eq!(results.len(), 1, "{stderr}");
    assert!(results[0].0.starts_with("hello-file__"), "{}", results[0].0);
    assert_eq!(results[0].1["verifier_result"]["rewards"]["reward"], 1.0);
    assert_eq!(job.json("config.json")["n_concurrent_trials"], 2);
}
