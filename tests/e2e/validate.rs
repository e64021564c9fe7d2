//! `runner validate-submission`, `runner validate-trajectory` and the CI preflight script,
//! driven through the real binary on the fixtures in `leaderboard/tests/fixtures`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::files::copy_dir;

use crate::support::{Job, ensure_base_image, exited, git, runner, workspace_root};

fn fixtures() -> PathBuf {
    workspace_root().join("leaderboard/tests/fixtures")
}

fn h13_job() -> PathBuf {
    fixtures().join("harbor-h13/2026-06-10__12-00-00")
}

/// `runner validate-submission JOB`, to which a test adds its flags.
fn validate_submission(job: impl AsRef<std::ffi::OsStr>) -> assert_cmd::Command {
    let mut command = runner();
    command.arg("validate-submission").arg(job);
    command
}

/// The names of the rules a JSON report says failed.
fn failed_rules(report: &Value) -> Vec<&str> {
    let rules = report["rules"]
        .as_array()
        .expect("a JSON report lists its rules");
    rules
        .iter()
        .filter(|r| r["status"] == "failed")
        .map(|r| r["rule"].as_str().unwrap())
        .collect()
}

/// The runner binary `runner()` runs (built next to this test binary's `deps/`).
fn runner_path() -> PathBuf {
    let _ = runner();
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("runner")
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

/// A copy of the [H13] job in `dir` whose trials record that their tests ran isolated, as
/// runner records it: Harbor's records do not say, and `verifier_isolated` requires it.
fn isolated_h13(dir: &Path) -> PathBuf {
    let job = dir.join("2026-06-10__12-00-00");
    copy_dir(&h13_job(), &job);
    for entry in std::fs::read_dir(&job).unwrap().flatten() {
        let result = entry.path().join("result.json");
        if entry.path().is_dir() && result.is_file() {
            edit_json(&result, |r| {
                r["verifier_isolation"] = json!({"isolated": true, "detail": "verifier jail"})
            });
        }
    }
    job
}

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn valid_harbor_job_passes_with_dataset_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let output = validate_submission(isolated_h13(dir.path()))
        .arg("--dataset")
        .arg(fixtures().join("dataset"))
        .arg("--metadata")
        .arg(fixtures().join("metadata.yaml"))
        .output()
        .unwrap();
    let (out, _) = exited(&output, 0);
    assert!(out.contains("Result: VALID"), "{out}");
    assert!(out.contains("accuracy 60.00% ± 24.49% (stderr)"), "{out}");
    assert!(out.contains("pass@2 90.00%"), "{out}");
    assert!(out.contains("AgentTimeoutError 1"), "{out}");
}

#[test]
fn json_report_has_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let output = validate_submission(isolated_h13(dir.path()))
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["schema"], "runner.validate-submission/v1");
    assert_eq!(report["valid"], true);
    let rules = report["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 21);
    assert_eq!(rules[0]["rule"], "no_job_overrides");
    assert_eq!(rules[0]["status"], "passed");
    let skipped: Vec<&str> = rules
        .iter()
        .filter(|r| r["status"] == "skipped")
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    // A Harbor job keeps no record manifest: not recorded, so not signed either.
    assert_eq!(
        skipped,
        [
            "correct_task_versions",
            "metadata_formatted_correctly",
            "records_unchanged",
            "trusted_signature"
        ]
    );
    let f = &report["figures"];
    assert_eq!(f["n_trials"], 5);
    assert_eq!(f["accuracy"], 0.6);
    assert_eq!(f["trials_per_task"], json!({"terminal-bench/regex-log": 5}));
    assert_eq!(
        f["errored_by_exception_type"],
        json!({"AgentTimeoutError": 1})
    );
}

/// An old Harbor job (`orchestrator`, no lock.json) is read, and fails only for what its
/// records cannot show: its plan and its verifier's isolation.
#[test]
fn old_harbor_job_with_orchestrator_fails_only_for_its_plan_and_isolation() {
    let job = fixtures().join("harbor-h144/tbench-2.0-k5-v01");
    let output = validate_submission(job)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let failed = failed_rules(&report);
    assert_eq!(
        failed,
        ["planned_trials", "verifier_isolated"],
        "{report:#}"
    );
}

#[test]
fn invalid_job_exits_1_with_github_annotations_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    copy_dir(&h13_job(), &job);
    edit_json(&job.join("config.json"), |c| {
        c["environment"]["override_memory_mb"] = json!(65536)
    });
    let summary = dir.path().join("summary.md");
    let output = validate_submission(&job)
        .args(["--format", "github"])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let (out, _) = exited(&output, 1);
    let expected = format!(
        "::error file={}/config.json,title=no_job_overrides::environment.override_memory_mb is 65536; it must be null",
        job.display().to_string().replace(':', "%3A")
    );
    assert!(out.lines().any(|l| l == expected), "{out}");
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("## Leaderboard preflight: ❌ invalid"), "{md}");
    assert!(md.contains("| `no_job_overrides` | ❌ fail | 1 |"), "{md}");
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = validate_submission(dir.path().join("nope"))
        .output()
        .unwrap();
    let (_, stderr) = exited(&output, 2);
    assert!(stderr.contains("not a directory"));
    let output = validate_submission(dir.path()).output().unwrap();
    let (_, stderr) = exited(&output, 2);
    assert!(stderr.contains("no config.json"));
    validate_submission(h13_job())
        .arg("--metadata")
        .arg(dir.path().join("missing.yaml"))
        .assert()
        .code(2);
}

#[test]
fn validate_trajectory_accepts_the_valid_fixtures() {
    let valid = fixtures().join("atif/valid");
    let output = runner()
        .arg("validate-trajectory")
        .args(["v1.0.json", "v1.6-image.json", "v1.7.json"].map(|f| valid.join(f)))
        .output()
        .unwrap();
    let (out, _) = exited(&output, 0);
    assert_eq!(out.matches(": valid").count(), 3, "{out}");
}

#[test]
fn validate_trajectory_reports_each_rule_with_its_json_path() {
    let invalid = fixtures().join("atif/invalid");
    let cases = [
        ("step-ids-not-sequential", "$.steps[2].step_id"),
        ("agent-only-field-on-user-step", "$.steps[0].model_name"),
        (
            "observation-call-id-mismatch",
            "$.steps[1].observation.results[0].source_call_id",
        ),
        ("bad-timestamp", "$.steps[1].timestamp"),
        ("unknown-field", "$.steps[1].tool_calls[0].args"),
        ("later-version-field", "$.steps[1].llm_call_count"),
        ("missing-required-field", "$.agent.version"),
        ("llm-call-count-zero-with-metrics", "$.steps[1].metrics"),
        (
            "duplicate-subagent-id",
            "$.subagent_trajectories[1].trajectory_id",
        ),
        ("session-id-missing-v1.6", "$.session_id"),
        ("missing-image", "$.steps[0].message[0].source.path"),
        ("not-json", "$"),
    ];
    for (name, path) in cases {
        let output = runner()
            .arg("validate-trajectory")
            .arg(invalid.join(format!("{name}.json")))
            .output()
            .unwrap();
        let out = stdout_of(&output);
        assert_eq!(output.status.code(), Some(1), "{name}: {out}");
        assert!(
            out.contains("1 error(s)"),
            "{name} should have exactly one error: {out}"
        );
        assert!(
            out.contains(&format!("  {path}: ")),
            "{name} should report {path}: {out}"
        );
    }
}

#[test]
fn validate_trajectory_json_and_unreadable_files() {
    let file = fixtures().join("atif/invalid/bad-timestamp.json");
    let output = runner()
        .arg("validate-trajectory")
        .arg(&file)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["files"][0]["valid"], false);
    assert_eq!(doc["files"][0]["errors"][0]["path"], "$.steps[1].timestamp");
    runner()
        .arg("validate-trajectory")
        .arg("/nonexistent/trajectory.json")
        .assert()
        .code(2);
}

/// Makes `repo` a leaderboard repository with one commit (a README); returns that commit.
fn leaderboard_repo(repo: &Path) -> String {
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "leaderboard\n").unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "base"]);
    git(repo, &["rev-parse", "HEAD"])
}

fn preflight(repo: &Path, base: &str) -> std::process::Output {
    Command::new("bash")
        .arg(workspace_root().join("leaderboard/ci/preflight.sh"))
        .current_dir(repo)
        .env("PREFLIGHT_BASE", base)
        .env("PREFLIGHT_HEAD", "HEAD")
        .env("PREFLIGHT_DATASET", fixtures().join("dataset"))
        .env("RUNNER", runner_path())
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap()
}

#[test]
fn ci_preflight_validates_the_submission_a_pull_request_adds() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    let base = leaderboard_repo(repo);

    // The "PR": one submission dir with metadata and a job dir.
    let sub = repo.join("submissions/terminus-2__claude-opus-4-6");
    std::fs::create_dir_all(&sub).unwrap();
    isolated_h13(&sub);
    std::fs::copy(fixtures().join("metadata.yaml"), sub.join("metadata.yaml")).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "add submission"]);
    let output = preflight(repo, &base);
    let (out, _) = exited(&output, 0);
    assert!(
        out.contains(
            "::group::validate-submission submissions/terminus-2__claude-opus-4-6 (1 job dirs)"
        ),
        "{out}"
    );
    assert!(out.contains("Leaderboard preflight: ✅ valid"), "{out}");

    // A follow-up commit sneaks in a timeout multiplier: the check fails with an annotation on
    // the file, path relative to the repository as GitHub needs it.
    edit_json(
        &sub.join("2026-06-10__12-00-00/regex-log__aB3dE9x/config.json"),
        |c| c["timeout_multiplier"] = json!(3.0),
    );
    git(repo, &["commit", "-qam", "tweak"]);
    let output = preflight(repo, &base);
    let (out, _) = exited(&output, 1);
    assert!(
        out.contains(
            "::error file=submissions/terminus-2__claude-opus-4-6/2026-06-10__12-00-00/regex-log__aB3dE9x/config.json,\
             title=no_trial_overrides::timeout_multiplier is 3.0; it must be 1.0 (or absent)"
        ),
        "{out}"
    );
}

#[test]
fn ci_preflight_flags_files_outside_a_submission_dir_and_ignores_other_changes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    let base = leaderboard_repo(repo);
    std::fs::write(repo.join("README.md"), "changed\n").unwrap();
    git(repo, &["commit", "-qam", "docs only"]);
    let output = preflight(repo, &base);
    let (out, _) = exited(&output, 0);
    assert!(out.contains("nothing to validate"));

    std::fs::create_dir_all(repo.join("submissions/stray")).unwrap();
    std::fs::write(repo.join("submissions/stray/result.json"), "{}").unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "stray"]);
    let output = preflight(repo, &base);
    let (out, _) = exited(&output, 1);
    assert!(
        out.contains("::error file=submissions/stray/result.json,title=submission_layout::"),
        "{out}"
    );
}

/// A job written by `runner run` with k=5 and the named `oracle` agent passes every rule except
/// the trajectory rule (the oracle writes no ATIF); one valid trajectory copied into every
/// rewarded trial after the run is not the run's: the records changed, and the copies are one
/// session of another agent.
#[test]
fn a_job_written_by_runner_run_passes() {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let task = workspace_root().join("tasks/examples/hello-file");
    runner()
        .args(["run", "--agent", "oracle", "--k", "5", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(&task)
        .timeout(Duration::from_secs(600))
        .assert()
        .code(0);
    let job = Job::single_in(jobs.path());
    let validate = || {
        let output = validate_submission(&job.dir)
            .arg("--dataset")
            .arg(&task)
            .args(["--format", "json"])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let report = validate();
    let failed = failed_rules(&report);
    assert_eq!(failed, ["passing_trial_trajectories"], "{report:#}");
    assert_eq!(report["figures"]["n_trials"], 5);

    let trajectory = std::fs::read(fixtures().join("atif/valid/v1.7.json")).unwrap();
    for (name, _) in job.trial_results() {
        let agent = job.dir.join(&name).join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(agent.join("trajectory.json"), &trajectory).unwrap();
    }
    let report = validate();
    assert_eq!(
        failed_rules(&report),
        ["records_unchanged", "trajectories_bound"],
        "{report:#}"
    );
}
