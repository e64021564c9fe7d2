//! `runner view`, `runner summary` and `runner compare` through the binary, on job dirs written
//! by runner and by Harbor.

use crate::support::{runner, workspace_root};

fn runner_job() -> std::path::PathBuf {
    workspace_root().join("runner/viewer/tests/fixtures/runner-job/2026-12-01__10-00-00")
}

fn harbor_job() -> std::path::PathBuf {
    workspace_root().join("leaderboard/tests/fixtures/harbor-h13/2026-06-10__12-00-00")
}

#[test]
fn summary_reads_runner_and_harbor_jobs_as_json() {
    // The text of both is snapshotted in outputs.rs.
    for job in [runner_job(), harbor_job()] {
        let out = runner()
            .args(["summary", "--format", "json"])
            .arg(&job)
            .assert()
            .code(0);
        let doc: serde_json::Value = serde_json::from_slice(&out.get_output().stdout)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", job.display()));
        assert_eq!(doc["schema"], "runner.summary/v1", "{}", job.display());
    }
}

#[test]
fn view_writes_a_report_and_compare_of_a_job_with_itself_finds_no_difference() {
    let out_dir = tempfile::tempdir().unwrap();
    runner()
        .arg("view")
        .arg(runner_job())
        .arg(harbor_job())
        .arg("--out")
        .arg(out_dir.path())
        .assert()
        .code(0);
    let index = std::fs::read_to_string(out_dir.path().join("index.html")).expect("index.html");
    assert!(index.contains("<table"), "{index}");
    let out = runner()
        .args(["compare", "--format", "json"])
        .arg(runner_job())
        .arg(runner_job())
        .assert()
        .code(0);
    let doc: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(doc["schema"], "runner.compare/v1");
    assert_eq!(doc["difference"], 0.0, "{doc:#}");
    assert_eq!(doc["a_better"], 0);
    assert_eq!(doc["b_better"], 0);
    assert!(doc["paired_tasks"].as_u64().unwrap() > 0, "{doc:#}");
}

#[test]
fn a_path_that_is_not_a_job_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["summary", "view"] {
        let out = runner().arg(command).arg(dir.path()).assert().code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stderr.contains(&dir.path().display().to_string()),
            "{command}: {stderr}"
        );
    }
}
