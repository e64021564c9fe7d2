//! Harbor 0.26's `override_error_policy` in a job config changes what a real run does: an
//! agent timeout (never retried and always verified by default) retried and left unverified,
//! with the override and the policy it produced recorded; an entry runner cannot honour is
//! refused before anything starts. Against the real Docker engine.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ensure_base_image, exception, exited, runner, workspace_root};

fn json_at(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A job config running the oracle on `slow-oracle` (its agent phase always times out) with one
/// retry allowed, plus `extra` fields.
fn config(jobs: &Path, name: &str, extra: Value) -> Value {
    let mut config = json!({
        "job_name": name,
        "jobs_dir": jobs,
        "n_attempts": 1,
        "n_concurrent_trials": 1,
        "agents": [{"name": "oracle"}],
        "datasets": [{
            "path": workspace_root().join("tasks/examples"),
            "task_names": ["slow-oracle"],
        }],
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
    // An agent timeout is the agent's failure: a result (0), so the job exits 0.
    exited(&out, 0);
    let job = dir.join("jobs").join(name);
    let trials: Vec<_> = std::fs::read_dir(&job)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("result.json").is_file())
        .collect();
    assert_eq!(trials.len(), 1, "{trials:?}");
    trials[0].clone()
}

#[test]
fn an_override_retries_an_agent_timeout_and_stops_its_grading() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");

    // Runner's default: an agent timeout is not retried and is still verified.
    let trial = run_config(tmp.path(), "default", &config(&jobs, "default", json!({})));
    let result = json_at(&trial.join("result.json"));
    assert_eq!(exception(&result).as_deref(), Some("AgentTimeoutError"));
    assert_eq!(result["attempts"], 1);
    assert!(result["verifier_result"].is_object(), "{result}");
    assert_eq!(result["exception_info"].get("policy_override"), None);
    assert_eq!(
        result["exception_info"]["policy"],
        json!({"should_retry": false, "should_grade": true, "has_valid_reward": true})
    );

    // Overridden: retried (two attempts, the first kept) and not verified.
    let overrides = json!({"override_error_policy": {
        "AgentTimeoutError": {"should_retry": true, "should_grade": false}
    }});
    let trial = run_config(
        tmp.path(),
        "overridden",
        &config(&jobs, "overridden", overrides),
    );
    let result = json_at(&trial.join("result.json"));
    assert_eq!(exception(&result).as_deref(), Some("AgentTimeoutError"));
    assert_eq!(result["attempts"], 2, "{result}");
    assert!(trial.join("attempts/1/result.json").is_file());
    assert!(result["verifier_result"].is_null(), "{result}");
    assert_eq!(
        result["exception_info"]["policy_override"],
        json!({"should_retry": true, "should_grade": false, "has_valid_reward": null})
    );
    assert_eq!(
        result["exception_info"]["policy"],
        json!({"should_retry": true, "should_grade": false, "has_valid_reward": true})
    );
    assert_eq!(result["reward_valid"], false);
    let log = std::fs::read_to_string(trial.join("trial.log")).unwrap();
    assert!(
        log.contains("not verified: override_error_policy.AgentTimeoutError.should_grade is false"),
        "{log}"
    );
    // The job records the overrides, and the exclusions they edited, as Harbor 0.26 does.
    let job = trial.parent().unwrap();
    let job_config = json_at(&job.join("config.json"));
    assert_eq!(
        job_config["override_error_policy"]["AgentTimeoutError"]["should_retry"],
        true
    );
    let excluded = job_config["retry"]["exclude_exceptions"]
        .as_array()
        .unwrap();
    assert!(
        !excluded.contains(&json!("AgentTimeoutError")),
        "{excluded:?}"
    );
    assert!(
        excluded.contains(&json!("VerifierTimeoutError")),
        "{excluded:?}"
    );
    let lock = json_at(&job.join("lock.json"));
    assert_eq!(
        lock["trials"][0]["override_error_policy"]["AgentTimeoutError"]["should_grade"],
        false
    );
    let trial_config = json_at(&trial.join("config.json"));
    assert_eq!(
        trial_config["override_error_policy"],
        job_config["override_error_policy"]
    );
}

#[test]
fn an_override_runner_cannot_honour_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let overrides = json!({"override_error_policy": {
        "EnvironmentStartTimeoutError": {"should_grade": true}
    }});
    let file = tmp.path().join("refused.json");
    std::fs::write(&file, config(&jobs, "refused", overrides).to_string()).unwrap();
    let out = runner().args(["run", "-c"]).arg(&file).output().unwrap();
    let (_, err) = exited(&out, 2);
    assert!(
        err.contains("refused.json")
            && err.contains(
                "override_error_policy.EnvironmentStartTimeoutError.should_grade: true is not supported"
            ),
        "{err}"
    );
    assert!(!jobs.exists(), "nothing was started");
}
