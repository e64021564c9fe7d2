//! Harbor 0.26's record shapes in a real run: the eval key named from the dataset directory
//! (`oracle__examples`), lock.json as 0.26's schema 3, and a job written in the earlier shape
//! (lock.json schema 1, trials recorded under `dataset.toml`'s name) resumed under one eval key.
//! Against the real Docker engine.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ensure_base_image, exited, runner, workspace_root};

fn json_at(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// `runner run` of the oracle on the examples' hello-file with `extra` flags.
fn oracle_hello(extra: &[&str]) {
    let out = runner()
        .args(["run", "-a", "oracle", "-i", "hello-file", "--path"])
        .arg(workspace_root().join("tasks/examples"))
        .args(extra)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    exited(&out, 0);
}

/// The job's trial dirs' result.json, parsed.
fn trial_results(job: &Path) -> Vec<Value> {
    let mut results: Vec<Value> = std::fs::read_dir(job)
        .unwrap()
        .map(|e| e.unwrap().path().join("result.json"))
        .filter(|p| p.is_file())
        .map(|p| json_at(&p))
        .collect();
    results.sort_by_key(|r| r["trial_name"].as_str().unwrap().to_owned());
    results
}

/// Turns the job's records into what the runner wrote before Harbor 0.26's shapes: lock.json
/// schema 1 without 0.26's trial fields, and every trial recorded under `dataset.toml`'s name.
fn make_it_old(job: &Path) {
    let mut lock = json_at(&job.join("lock.json"));
    lock["schema_version"] = json!(1);
    for trial in lock["trials"].as_array_mut().unwrap() {
        let entry = trial.as_object_mut().unwrap();
        for key in [
            "schema_version",
            "install_only",
            "extra_instructions",
            "user_agent",
            "user_persona",
            "user_prompt_template",
            "bridge_prompt",
            "bridge_inputs",
            "skills",
            "extra_docker_compose",
            "artifacts",
            "override_error_policy",
            "source_trial",
        ] {
            entry.remove(key);
        }
        entry["verifier"]
            .as_object_mut()
            .unwrap()
            .remove("environment_mode");
        let task = entry["task"].as_object_mut().unwrap();
        for key in ["version", "git_url", "git_commit_id"] {
            task.remove(key);
        }
        task.insert("source".into(), json!("examples/runner-examples"));
    }
    write_json(&job.join("lock.json"), &lock);
    for entry in std::fs::read_dir(job).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("result.json").is_file() {
            continue;
        }
        let mut result = json_at(&dir.join("result.json"));
        result["source"] = json!("examples/runner-examples");
        result["config"]["task"]["source"] = json!("examples/runner-examples");
        write_json(&dir.join("result.json"), &result);
        let mut config = json_at(&dir.join("config.json"));
        config["task"]["source"] = json!("examples/runner-examples");
        write_json(&dir.join("config.json"), &config);
    }
}

#[test]
fn the_eval_key_is_harbors_and_an_older_job_resumes_under_it() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let jobs_dir = jobs.to_str().unwrap();
    oracle_hello(&["--jobs-dir", jobs_dir, "--job-name", "j", "--k", "1"]);
    let job = jobs.join("j");

    // As Harbor 0.26 names it: the dataset directory, not dataset.toml's name.
    let result = json_at(&job.join("result.json"));
    let keys: Vec<&String> = result["stats"]["evals"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["oracle__examples"]);
    let trial = &trial_results(&job)[0];
    assert_eq!(trial["source"], "examples");
    assert_eq!(trial["config"]["task"]["source"], "examples");
    // task_checksum is Harbor's dirhash, not the lock's package digest.
    let lock = json_at(&job.join("lock.json"));
    assert_eq!(lock["schema_version"], 3);
    let digest = lock["trials"][0]["task"]["digest"].as_str().unwrap();
    let checksum = trial["task_checksum"].as_str().unwrap();
    assert_eq!(checksum.len(), 64);
    assert_ne!(format!("sha256:{checksum}"), digest);
    assert_eq!(lock["trials"][0]["schema_version"], 2);
    assert_eq!(lock["trials"][0]["verifier"]["environment_mode"], "shared");
    assert_eq!(lock["trials"][0]["task"]["source"], "examples");
    // Written as 0.26 writes its locks (no null field), and each trial has its own.
    assert!(!lock.to_string().contains("null"), "{lock}");
    let trial_lock = json_at(
        &job.join(trial["trial_name"].as_str().unwrap())
            .join("lock.json"),
    );
    assert_eq!(trial_lock["schema_version"], 2);
    assert_eq!(trial_lock["task"]["digest"], digest);
    assert_eq!(trial_lock["verifier"]["environment_mode"], "shared");

    // The same job as the earlier runner wrote it resumes with one more trial: the old
    // trial is kept, both count under the one key, and lock.json is rewritten as schema 3.
    make_it_old(&job);
    let kept = std::fs::read(
        job.join(trial["trial_name"].as_str().unwrap())
            .join("result.json"),
    )
    .unwrap();
    oracle_hello(&["--k", "2", "--resume", job.to_str().unwrap()]);
    let results = trial_results(&job);
    assert_eq!(results.len(), 2);
    let old = job
        .join(trial["trial_name"].as_str().unwrap())
        .join("result.json");
    assert_eq!(
        std::fs::read(old).unwrap(),
        kept,
        "the old trial's record is untouched"
    );
    let result = json_at(&job.join("result.json"));
    let evals = result["stats"]["evals"].as_object().unwrap();
    assert_eq!(evals.keys().collect::<Vec<_>>(), ["oracle__examples"]);
    assert_eq!(evals["oracle__examples"]["n_trials"], 2, "{result}");
    let lock = json_at(&job.join("lock.json"));
    assert_eq!(lock["schema_version"], 3);
    for entry in lock["trials"].as_array().unwrap() {
        assert_eq!(entry["schema_version"], 2, "{entry}");
        assert_eq!(entry["verifier"]["environment_mode"], "shared", "{entry}");
    }
}
