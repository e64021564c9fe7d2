//! Multi-step tasks and artifacts against the real Docker engine: the examples
//! `two-step-gate` (two steps, a `min_reward` gate, a step workdir with `setup.sh`) and
//! `artifacts` (declared artifacts with Harbor's manifest), oracle 1 and nop 0.

use std::time::Duration;

use crate::support::{
    Job, containers_with_label, ensure_base_image, exception, reward, runner, workspace_root,
};

/// Runs `agent` once on the example `task` into a fresh jobs dir.
fn run_example(task: &str, agent: &str) -> (tempfile::TempDir, Job) {
    let jobs = tempfile::tempdir().unwrap();
    ensure_base_image();
    let output = runner()
        .args(["run", "--agent", agent, "--k", "1", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(workspace_root().join("tasks/examples").join(task))
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{task} with {agent}: every trial scored"
    );
    let job = Job::single_in(jobs.path());
    assert!(
        containers_with_label(&format!("runner.job={}", job.job_id())).is_empty(),
        "no container left behind"
    );
    (jobs, job)
}

fn step_summary(result: &serde_json::Value) -> Vec<(String, Option<f64>)> {
    result["step_results"]
        .as_array()
        .expect("step_results")
        .iter()
        .map(|s| {
            (
                s["step_name"].as_str().unwrap().to_owned(),
                s["verifier_result"]["rewards"]["reward"].as_f64(),
            )
        })
        .collect()
}

#[test]
fn the_oracle_passes_both_steps_of_the_gated_task() {
    let (_jobs, job) = run_example("two-step-gate", "oracle");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(
        exception(result),
        None,
        "{name}: {}",
        result["exception_info"]
    );
    assert_eq!(
        step_summary(result),
        [
            ("draft".to_owned(), Some(1.0)),
            ("finalize".to_owned(), Some(1.0))
        ]
    );
    assert_eq!(reward(result), Some(1.0));
    for step in ["draft", "finalize"] {
        assert_eq!(
            job.trial_file(name, &format!("steps/{step}/verifier/reward.txt"))
                .trim(),
            "1"
        );
        let manifest = job.trial_file(name, &format!("steps/{step}/artifacts/manifest.json"));
        assert!(
            manifest.contains("\"/logs/artifacts\""),
            "{step}: {manifest}"
        );
    }
    let step = &result["step_results"][1];
    assert!(step["agent_execution"]["started_at"].is_string());
    assert!(step["verifier"]["finished_at"].is_string());
}

#[test]
fn nop_fails_the_first_step_and_the_gate_skips_the_second() {
    let (_jobs, job) = run_example("two-step-gate", "nop");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(
        exception(result),
        None,
        "{name}: a missed gate is not an error"
    );
    assert_eq!(step_summary(result), [("draft".to_owned(), Some(0.0))]);
    assert_eq!(reward(result), Some(0.0));
    assert!(!job.dir.join(name).join("steps/finalize").exists());
}

#[test]
fn the_oracles_artifacts_are_collected_with_harbors_manifest_and_nop_scores_zero() {
    let (_jobs, job) = run_example("artifacts", "oracle");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(reward(result), Some(1.0), "{}", result["exception_info"]);
    assert_eq!(job.trial_file(name, "artifacts/report.txt").trim(), "3");
    assert!(
        job.trial_file(name, "artifacts/logs/run.log")
            .contains("counted")
    );
    assert!(
        !job.dir
            .join(name)
            .join("artifacts/logs/scratch.tmp")
            .exists(),
        "excluded by the task's pattern"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&job.trial_file(name, "artifacts/manifest.json")).unwrap();
    assert_eq!(
        manifest,
        serde_json::json!([
            {"source": "/logs/artifacts", "destination": "artifacts", "type": "directory", "status": "empty"},
            {"source": "/app/report.txt", "destination": "artifacts/report.txt", "type": "file", "status": "ok"},
            {"source": "/app/logs", "destination": "artifacts/logs", "type": "directory", "status": "ok"},
        ])
    );

    let (_jobs, job) = run_example("artifacts", "nop");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(reward(result), Some(0.0));
    let manifest = job.trial_file(name, "artifacts/manifest.json");
    assert!(
        manifest.contains("\"failed\""),
        "nothing to collect: {manifest}"
    );
}
