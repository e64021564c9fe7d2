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
    assert_eq!(report["schema"], "runner.validate-submission/v2");
    assert_eq!(report["valid"], true);
    assert_eq!(report["verdicts"]["leaderboard"]["valid"], true);
    assert_eq!(report["verdicts"]["evidence"]["decides"], false);
    let rules = report["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 24);
    assert_eq!(rules[0]["rule"], "no_job_overrides");
    assert_eq!(rules[0]["status"], "passed");
    assert_eq!(rules[0]["verdict"], "leaderboard");
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
/// records cannot show: its plan.
#[test]
fn old_harbor_job_with_orchestrator_fails_only_for_its_plan() {
    let job = fixtures().join("harbor-h144/tbench-2.0-k5-v01");
    let output = validate_submission(job)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let failed = failed_rules(&report);
    assert_eq!(failed, ["planned_trials"], "{report:#}");
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
    assert!(
        md.contains("| `no_job_overrides` | leaderboard | ❌ fail | 1 |"),
        "{md}"
    );
    // The job is Harbor's: its evidence is a notice, not an error.
    assert!(
        out.contains(&format!(
            "::notice file={},title=verifier_isolated::not recorded: 5 trials",
            job.display().to_string().replace(':', "%3A")
        )),
        "{out}"
    );
    assert!(
        md.contains("| `verifier_isolated` | evidence | ➖ not recorded | 1 |"),
        "{md}"
    );
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

    // The "PR": one submission dir in the TB 2.0 layout `submission prepare` writes.
    let sub = repo.join("submissions/terminal-bench/2.0/terminus-2__claude-opus-4-6");
    std::fs::create_dir_all(&sub).unwrap();
    isolated_h13(&sub);
    std::fs::copy(fixtures().join("metadata.yaml"), sub.join("metadata.yaml")).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "add submission"]);
    let output = preflight(repo, &base);
    let (out, _) = exited(&output, 0);
    assert!(
        out.contains(
            "::group::validate-submission submissions/terminal-bench/2.0/terminus-2__claude-opus-4-6 (1 job dirs)"
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
            "::error file=submissions/terminal-bench/2.0/terminus-2__claude-opus-4-6/2026-06-10__12-00-00/regex-log__aB3dE9x/config.json,\
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

/// A Harbor-written job that meets the rules is what the leaderboard accepts: VALID by
/// default, its evidence "not recorded"; an operator who asks for runner's evidence gets
/// INVALID, naming each rule not recorded.
#[test]
fn a_harbor_job_is_valid_by_default_and_invalid_when_evidence_is_required() {
    let output = validate_submission(h13_job())
        .arg("--dataset")
        .arg(fixtures().join("dataset"))
        .arg("--metadata")
        .arg(fixtures().join("metadata.yaml"))
        .output()
        .unwrap();
    let (out, _) = exited(&output, 0);
    assert!(out.contains("N/R  verifier_isolated"), "{out}");
    assert!(
        out.contains(
            "Evidence: NOT RECORDED (verifier_isolated, verifier_toolchain, declared_models_only, same_task_image, bridge_metering)"
        ),
        "{out}"
    );
    assert!(out.contains("Leaderboard: VALID"), "{out}");
    assert!(out.ends_with("Result: VALID\n"), "{out}");

    let output = validate_submission(h13_job())
        .args(["--require-evidence", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(report["require_evidence"], true);
    assert_eq!(report["verdicts"]["leaderboard"]["valid"], true);
    assert_eq!(
        report["verdicts"]["evidence"]["not_recorded"],
        json!([
            "verifier_isolated",
            "verifier_toolchain",
            "declared_models_only",
            "same_task_image",
            "bridge_metering"
        ])
    );
    assert!(failed_rules(&report).is_empty(), "{report:#}");
}

/// A runner job whose rewarded trial's tests ran with the agent's shim (`--agent-toolchain`
/// on `tasks/hostile-toolchain/python3-shim`, which the shim passes) is INVALID with or without
/// `--require-evidence`: that reward is not the task's.
#[test]
fn a_rewarded_trial_verified_with_an_agent_changed_toolchain_is_invalid_either_way() {
    let run = crate::oracle_run::OracleRun::of(
        "hostile-toolchain",
        "hostile-toolchain",
        "lb-toolchain",
        &["--agent-toolchain", "-i", "hostile-toolchain/python3-shim"].map(String::from),
    );
    assert_eq!(run.code, Some(0), "the job failed:\n{}", run.stderr);
    for require in [false, true] {
        let mut command = validate_submission(&run.job.dir);
        command.args(["--format", "json", "--min-trials", "1"]);
        if require {
            command.arg("--require-evidence");
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(1));
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["valid"], false, "{report:#}");
        assert_eq!(report["verdicts"]["leaderboard"]["valid"], false);
        let failed = failed_rules(&report);
        assert!(
            failed.contains(&"uncompromised_rewards") && failed.contains(&"verifier_toolchain"),
            "{report:#}"
        );
        let rule = report["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == "uncompromised_rewards")
            .unwrap();
        let message = rule["violations"][0]["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "reward 1, but the tests ran with programs or startup hooks the agent changed"
            ) && message.contains("/usr/local/bin/python3"),
            "{message}"
        );
    }
}

/// The digests of the tasks at `path`, as `runner tasks digest --format json` prints them.
fn digests(path: &Path) -> Vec<(String, String)> {
    let output = runner()
        .args(["tasks", "digest", "--format", "json"])
        .arg(path)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A TB 2.1-style published manifest of `tasks` in `dir`.
fn write_manifest(dir: &Path, tasks: &[(String, String)]) -> PathBuf {
    let mut text = String::from(
        "# published with the dataset\n[dataset]\nname = \"terminal-bench/terminal-bench-2-1\"\nversion = \"2.1\"\n",
    );
    for (name, digest) in tasks {
        text.push_str(&format!(
            "\n[[tasks]]\nname = \"{name}\"\ndigest = \"{digest}\"\n"
        ));
    }
    let path = dir.join("dataset.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// One manifest reader for `validate-submission --dataset MANIFEST` and `tasks digest
/// --check`: a matching manifest validates the submission and checks the local dataset; one
/// whose digest differs names the task in both.
#[test]
fn a_published_manifest_checks_a_submission_and_a_local_dataset() {
    let dataset = fixtures().join("dataset");
    let tasks = digests(&dataset);
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), &tasks);
    let job = isolated_h13(dir.path());
    let output = validate_submission(&job)
        .arg("--dataset")
        .arg(&manifest)
        .output()
        .unwrap();
    let (out, _) = exited(&output, 0);
    assert!(out.contains("PASS correct_task_versions"), "{out}");
    let output = runner()
        .args(["tasks", "digest", "--check"])
        .arg(&manifest)
        .arg(&dataset)
        .output()
        .unwrap();
    let (out, _) = exited(&output, 0);
    assert!(out.contains("1 of 1 manifest task(s) match"), "{out}");

    let (name, digest) = &tasks[0];
    let other = format!("sha256:{}", "0f".repeat(32));
    let manifest = write_manifest(dir.path(), &[(name.clone(), other.clone())]);
    let output = validate_submission(&job)
        .arg("--dataset")
        .arg(&manifest)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(failed_rules(&report), ["correct_task_versions"]);
    let text = report.to_string();
    assert!(
        text.contains(&format!(
            "task {name} ran at {digest} but the dataset's content digest is {other}"
        )),
        "{report:#}"
    );
    let output = runner()
        .args(["tasks", "digest", "--check"])
        .arg(&manifest)
        .arg(&dataset)
        .output()
        .unwrap();
    let (out, _) = exited(&output, 1);
    assert!(
        out.contains(&format!("changed  {name}: the manifest pins {other}")),
        "{out}"
    );
}

/// A provider-key-shaped value no real provider issued, set in the environment of the run and
/// of `submission prepare`.
const FAKE_KEY: &str = "sk-ant-api03-lbprepare0FAKE0key0never0issued0by0anyone0000";

/// Every file under `dir` (recursively) that contains `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            found.extend(files_containing(&path, needle));
        } else if std::fs::read(&path)
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle)
        {
            found.push(path);
        }
    }
    found
}

/// `runner submission prepare` on a real runner job (oracle, k = 5, on tasks/examples): refused
/// while a rule fails (nothing written); once every rewarded trial has its trajectory, it
/// writes the TB 2.0 folder with scrubbed job dirs, metadata.yaml and the report, with the
/// provider key of the environment nowhere in it; `validate-submission --metadata` fails on
/// the marked fields, and passes once the test fills them.
#[test]
fn submission_prepare_writes_a_folder_the_leaderboard_check_passes() {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let task = workspace_root().join("tasks/examples/hello-file");
    runner()
        .args(["run", "--agent", "oracle", "--k", "5", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(&task)
        .env("ANTHROPIC_API_KEY", FAKE_KEY)
        .timeout(Duration::from_secs(600))
        .assert()
        .code(0);
    let job = Job::single_in(jobs.path());
    let out = tempfile::tempdir().unwrap();
    let prepare = |job: &Path| {
        let mut command = runner();
        command
            .args(["submission", "prepare"])
            .arg(job)
            .args(["--benchmark", "terminal-bench", "--version", "2.0", "-o"])
            .arg(out.path())
            .arg("--dataset")
            .arg(&task)
            .env("ANTHROPIC_API_KEY", FAKE_KEY);
        command.output().unwrap()
    };
    // The oracle writes no trajectory: the leaderboard would refuse it, so prepare does.
    let output = prepare(&job.dir);
    let (stdout, stderr) = exited(&output, 1);
    assert!(
        stdout.contains("FAIL passing_trial_trajectories"),
        "{stdout}"
    );
    assert!(stdout.contains("PASS no_provider_keys"), "{stdout}");
    assert!(stderr.contains("refused"), "{stderr}");
    assert!(
        !out.path()
            .join("submissions")
            .join("terminal-bench")
            .join("2.0")
            .join("oracle__no-model")
            .exists()
    );

    // An agent that writes its trajectory (the reference agent's ATIF), the same key in the
    // runner's environment: written, valid, and the key nowhere in the folder. (Records are
    // never edited after the run here: the record manifest would show it.)
    let ref_jobs = tempfile::tempdir().unwrap();
    runner()
        .args(["run", "--agent-config"])
        .arg(workspace_root().join("adapter/agents/reference/agent.toml"))
        .args(["--k", "5", "--jobs-dir"])
        .arg(ref_jobs.path())
        .arg("--path")
        .arg(&task)
        .env("ANTHROPIC_API_KEY", FAKE_KEY)
        .timeout(Duration::from_secs(900))
        .assert()
        .code(0);
    let job = Job::single_in(ref_jobs.path());
    let output = prepare(&job.dir);
    let (stdout, _) = exited(&output, 0);
    let folder = out
        .path()
        .join("submissions/terminal-bench/2.0/reference-agent__scripted-plan");
    assert!(
        stdout.contains(&format!("wrote {}", folder.display())),
        "{stdout}"
    );
    let job_name = job.dir.file_name().unwrap();
    let copy = folder.join(job_name);
    assert!(copy.join("config.json").is_file() && copy.join("lock.json").is_file());
    assert_eq!(
        std::fs::read_dir(&copy)
            .unwrap()
            .flatten()
            .filter(|e| e.path().join("result.json").is_file())
            .count(),
        5
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(folder.join("validate-submission.json")).unwrap())
            .unwrap();
    assert_eq!(report["valid"], true, "{report:#}");
    // No rule fails: the reference agent calls no model, so the bridge's evidence is only
    // "not recorded".
    let failed: Vec<&Value> = report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "failed")
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(report["jobs"], json!([job_name.to_str().unwrap()]));
    assert!(
        files_containing(out.path(), FAKE_KEY.as_bytes()).is_empty(),
        "the provider key reached the submission folder"
    );
    // Nothing staged is left beside it.
    let beside: Vec<_> = std::fs::read_dir(folder.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        beside,
        [std::ffi::OsString::from("reference-agent__scripted-plan")]
    );

    let metadata = folder.join("metadata.yaml");
    let check = || {
        validate_submission(&copy)
            .arg("--metadata")
            .arg(&metadata)
            .arg("--dataset")
            .arg(&task)
            .output()
            .unwrap()
    };
    let output = check();
    let (stdout, _) = exited(&output, 1);
    assert!(
        stdout.contains("FAIL metadata_formatted_correctly"),
        "{stdout}"
    );
    assert!(
        stdout.contains("`agent_url` still holds the FILL-IN placeholder"),
        "{stdout}"
    );

    // The person's part: every marked value written.
    let text = std::fs::read_to_string(&metadata).unwrap();
    let filled: String = text
        .lines()
        .map(|line| match line.split_once(": \"FILL-IN") {
            Some((key, _)) => format!("{key}: \"written by a person\"\n"),
            None => format!("{line}\n"),
        })
        .collect();
    assert_ne!(filled, text);
    std::fs::write(&metadata, filled).unwrap();
    let output = check();
    let (stdout, _) = exited(&output, 0);
    assert!(
        stdout.contains("PASS metadata_formatted_correctly"),
        "{stdout}"
    );

    // A second prepare never merges into the folder.
    let output = prepare(&job.dir);
    let (_, stderr) = exited(&output, 2);
    assert!(stderr.contains("already exists"), "{stderr}");
}

/// `submission prepare` of a job whose records honestly hold a key (the task's instruction
/// carries one, so the agent's instruction.txt and trajectory do): scrub redacts it in the
/// copies, which the record manifest cannot vouch for, so the records rules judge the
/// originals, and the folder is written without the key.
#[test]
fn submission_prepare_judges_the_records_of_the_originals_scrub_redacted() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("hello-file");
    copy_dir(&workspace_root().join("tasks/examples/hello-file"), &task);
    let instruction = task.join("instruction.md");
    let mut text = std::fs::read_to_string(&instruction).unwrap();
    text.push_str(&format!("\n(The build key is {FAKE_KEY}; ignore it.)\n"));
    std::fs::write(&instruction, text).unwrap();
    let jobs = tmp.path().join("jobs");
    runner()
        .args(["run", "--agent-config"])
        .arg(workspace_root().join("adapter/agents/reference/agent.toml"))
        .args(["--k", "5", "--jobs-dir"])
        .arg(&jobs)
        .arg("--path")
        .arg(&task)
        .timeout(Duration::from_secs(900))
        .assert()
        .code(0);
    let job = Job::single_in(&jobs);
    assert!(
        !files_containing(&job.dir, FAKE_KEY.as_bytes()).is_empty(),
        "the key is in the run's records"
    );
    let out = tmp.path().join("out");
    let output = runner()
        .args(["submission", "prepare"])
        .arg(&job.dir)
        .args(["-o"])
        .arg(&out)
        .env("ANTHROPIC_API_KEY", FAKE_KEY)
        .output()
        .unwrap();
    let (stdout, stderr) = exited(&output, 0);
    assert!(
        stdout.contains("PASS records_unchanged"),
        "{stdout}\n{stderr}"
    );
    assert!(
        files_containing(&out, FAKE_KEY.as_bytes()).is_empty(),
        "the key reached the submission folder"
    );
}
