//! Harbor 0.26's `override_error_policy` in a job config changes what a real run does: an
//! agent timeout (verified by default) left unverified with its reward marked invalid, a
//! `VerifierEnvError` (never retried by default) retried, each with the override and the
//! policy it produced recorded; an entry runner cannot honour is refused before anything
//! starts. Against the real Docker engine.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ensure_base_image, exception, exited, runner, workspace_root};

fn json_at(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A job config running the oracle on the `task` of the dataset `dataset` with one retry
/// allowed, plus `extra` fields.
fn config(jobs: &Path, name: &str, dataset: &Path, task: &str, extra: Value) -> Value {
    let mut config = json!({
        "job_name": name,
        "jobs_dir": jobs,
        "n_attempts": 1,
        "n_concurrent_trials": 1,
        "agents": [{"name": "oracle"}],
        "datasets": [{"path": dataset, "task_names": [task]}],
        "retry": {"max_retries": 1},
    });
    for (key, value) in extra.as_object().unwrap() {
        config[key] = value.clone();
    }
    config
}

/// Runs `runner run -c` over `config` written to `<dir>/<name>.json`; the one trial's dir.
fn run_config(dir: &Path, name: &str, config: &Value) -> std::path::PathBuf {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, config.to_string()).unwrap();
    let out = runner()
        .args(["run", "-c"])
        .arg(&file)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    // An agent's failure is a result (0): exit 0; an infrastructure error: 3.
    assert!(matches!(out.status.code(), Some(0 | 3)), "{out:?}");
    let job = dir.join("jobs").join(name);
    let trials: Vec<_> = std::fs::read_dir(&job)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("result.json").is_file())
        .collect();
    assert_eq!(trials.len(), 1, "{trials:?}");
    trials[0].clone()
}

fn examples() -> std::path::PathBuf {
    workspace_root().join("tasks/examples")
}

#[test]
fn an_override_stops_grading_after_an_agent_timeout() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let slow = |name: &str, extra: Value| config(&jobs, name, &examples(), "slow-oracle", extra);

    // Runner's default (slow-oracle's agent phase always times out): verified, not retried.
    let trial = run_config(tmp.path(), "default", &slow("default", json!({})));
    let result = json_at(&trial.join("result.json"));
    assert_eq!(exception(&result).as_deref(), Some("AgentTimeoutError"));
    assert_eq!(result["attempts"], 1);
    assert!(result["verifier_result"].is_object(), "{result}");
    assert_eq!(result["exception_info"].get("policy_override"), None);
    assert_eq!(
        result["exception_info"]["policy"],
        json!({"should_retry": false, "should_grade": true, "has_valid_reward": true})
    );

    // Overridden: not verified, its reward (none) not valid, the override recorded.
    let overrides = json!({"override_error_policy": {
        "AgentTimeoutError": {"should_grade": false, "has_valid_reward": false}
    }});
    let trial = run_config(tmp.path(), "overridden", &slow("overridden", overrides));
    let result = json_at(&trial.join("result.json"));
    assert_eq!(exception(&result).as_deref(), Some("AgentTimeoutError"));
    assert_eq!(result["attempts"], 1);
    assert!(result["verifier_result"].is_null(), "{result}");
    assert!(
        result["verifier"].is_null(),
        "the verifier never started: {result}"
    );
    // Where it would have run, recorded as the trial started (as Harbor 0.26 records it).
    assert_eq!(result["verifier_environment_mode"], "shared");
    assert_eq!(
        result["exception_info"]["policy_override"],
        json!({"should_retry": null, "should_grade": false, "has_valid_reward": false})
    );
    assert_eq!(
        result["exception_info"]["policy"],
        json!({"should_retry": false, "should_grade": false, "has_valid_reward": false})
    );
    assert_eq!(result["reward_valid"], false);
    // Runner's own verdict is unchanged: the agent's failure.
    assert_eq!(result["outcome"], "agent_error");
    let log = std::fs::read_to_string(trial.join("trial.log")).unwrap();
    assert!(
        log.contains("not verified: override_error_policy.AgentTimeoutError.should_grade is false"),
        "{log}"
    );
    // The job records the overrides in its config, every trial's config and lock.json.
    let job = trial.parent().unwrap();
    let job_config = json_at(&job.join("config.json"));
    assert_eq!(
        job_config["override_error_policy"]["AgentTimeoutError"]["should_grade"],
        false
    );
    let trial_config = json_at(&trial.join("config.json"));
    assert_eq!(
        trial_config["override_error_policy"],
        job_config["override_error_policy"]
    );
    // lock.json leaves null fields out, as Harbor 0.26 writes its locks.
    let lock = json_at(&job.join("lock.json"));
    assert_eq!(
        lock["trials"][0]["override_error_policy"],
        json!({"AgentTimeoutError": {"should_grade": false, "has_valid_reward": false}})
    );
}

#[test]
fn an_override_retries_a_type_runner_excludes_by_default() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    // hello-file whose verifier needs a host variable that is not set: VerifierEnvError, an
    // infrastructure error runner does not retry by default (the variable stays unset).
    let dataset = tmp.path().join("dataset");
    testkit::files::copy_dir(&examples().join("hello-file"), &dataset.join("hello-file"));
    let toml = dataset.join("hello-file/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let unset = "${RUNNER_PARITY_SURELY_UNSET}";
    let edited = text.replace("${RUNNER_EXAMPLES_HELLO_PATH:-/app/hello.txt}", unset);
    assert_ne!(edited, text, "the fixture's verifier env changed");
    std::fs::write(&toml, edited).unwrap();
    let jobs = tmp.path().join("jobs");
    let run = |name: &str, extra: Value| {
        let trial = run_config(
            tmp.path(),
            name,
            &config(&jobs, name, &dataset, "hello-file", extra),
        );
        (trial.clone(), json_at(&trial.join("result.json")))
    };

    let (_, result) = run("default", json!({}));
    assert_eq!(exception(&result).as_deref(), Some("VerifierEnvError"));
    assert_eq!(result["attempts"], 1, "{result}");

    let overrides = json!({"override_error_policy": {"VerifierEnvError": {"should_retry": true}}});
    let (trial, result) = run("overridden", overrides);
    assert_eq!(exception(&result).as_deref(), Some("VerifierEnvError"));
    assert_eq!(result["attempts"], 2, "{result}");
    assert!(trial.join("attempts/1/result.json").is_file());
    assert_eq!(
        result["exception_info"]["policy_override"],
        json!({"should_retry": true, "should_grade": null, "has_valid_reward": null})
    );
    let job_config = json_at(&trial.parent().unwrap().join("config.json"));
    let excluded = job_config["retry"]["exclude_exceptions"]
        .as_array()
        .unwrap();
    assert!(
        !excluded.contains(&json!("VerifierEnvError")),
        "{excluded:?}"
    );
    assert!(
        excluded.contains(&json!("AgentTimeoutError")),
        "{excluded:?}"
    );
}

#[test]
fn an_override_runner_cannot_honour_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    for (entry, says) in [
        (
            json!({"EnvironmentStartTimeoutError": {"should_grade": true}}),
            "override_error_policy.EnvironmentStartTimeoutError.should_grade: true is not supported",
        ),
        (
            json!({"AgentTimeoutError": {"should_retry": true}}),
            "override_error_policy.AgentTimeoutError.should_retry: true is not supported",
        ),
    ] {
        let extra = json!({"override_error_policy": entry});
        let file = tmp.path().join("refused.json");
        let config = config(&jobs, "refused", &examples(), "slow-oracle", extra);
        std::fs::write(&file, config.to_string()).unwrap();
        let out = runner().args(["run", "-c"]).arg(&file).output().unwrap();
        let (_, err) = exited(&out, 2);
        assert!(err.contains("refused.json") && err.contains(says), "{err}");
        assert!(!jobs.exists(), "nothing was started");
    }
}
