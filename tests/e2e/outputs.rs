//! Every command's text output as users see it, snapshotted through the binary with
//! `runner_snapshot!`: `run` (the summary, its failures and coverage), `summary`, `compare`,
//! `validate-submission` (text, json, github), `scrub`, `tasks digest` and `images pull`.
//! (`--help` of every command is snapshotted by the binary's own unit tests.) A change in what
//! users read shows up here as a snapshot diff to review.

use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::files::copy_dir;

use crate::runner_snapshot;
use crate::support::{ensure_base_image, runner_bin, workspace_root};

/// An image line's last words depend on whether the engine had the image already.
const PREPARED: (&str, &str) = (r"(reused|built in \S+|pulled in \S+)$", "[PREPARED]");

fn runner(args: &[&str]) -> Command {
    let mut command = Command::new(runner_bin());
    command.args(args).env("NO_COLOR", "1");
    command
}

fn fixture(rel: &str) -> PathBuf {
    workspace_root().join(rel)
}

fn runner_job() -> PathBuf {
    fixture("runner/viewer/tests/fixtures/runner-job/2026-12-01__10-00-00")
}

fn harbor_job() -> PathBuf {
    fixture("leaderboard/tests/fixtures/harbor-h13/2026-06-10__12-00-00")
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn run_of_a_clean_job_and_of_one_with_an_agent_error() {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    for (name, task) in [
        ("run-clean", "tests/fixtures/tasks/quick"),
        ("run-agent-error", "tests/fixtures/tasks/verifier-timeout"),
    ] {
        let output = runner(&["run", "-a", "oracle", "-k", "2", "--progress", "none"])
            .args(["-p", path(&fixture(task)), "-o", path(jobs.path())])
            .args(["--job-name", name])
            .output()
            .unwrap();
        runner_snapshot!(name, output, PREPARED);
    }
}

#[test]
fn summary_and_compare_of_runners_and_harbors_jobs() {
    let summary = runner(&["summary", path(&runner_job())]).output().unwrap();
    runner_snapshot!("summary-runner-job", summary);
    let summary = runner(&["summary", path(&harbor_job())]).output().unwrap();
    runner_snapshot!("summary-harbor-job", summary);
    let compare = runner(&["compare", path(&runner_job()), path(&runner_job())])
        .output()
        .unwrap();
    runner_snapshot!("compare-a-job-with-itself", compare);
}

#[test]
fn validate_submission_in_each_format() {
    let dataset = fixture("leaderboard/tests/fixtures/dataset");
    for format in ["text", "json", "github"] {
        let output = runner(&["validate-submission", path(&harbor_job())])
            .args(["--dataset", path(&dataset), "--format", format])
            .env_remove("GITHUB_STEP_SUMMARY")
            .output()
            .unwrap();
        runner_snapshot!(format!("validate-submission-{format}"), output);
    }
}

#[test]
fn scrub_of_a_job_copy() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    copy_dir(&runner_job(), &job);
    let out = dir.path().join("scrubbed");
    let output = runner(&["scrub", "--in", path(&job), "--out", path(&out)])
        .args(["--secret", "DEMO_KEY=sk-demo-0123456789abcdef"])
        .output()
        .unwrap();
    runner_snapshot!("scrub", output);
}

#[test]
fn tasks_digest_of_the_examples() {
    let output = runner(&["tasks", "digest", path(&fixture("tasks/examples"))])
        .output()
        .unwrap();
    runner_snapshot!("tasks-digest-examples", output);
}

#[test]
fn images_pull_of_a_built_task() {
    ensure_base_image();
    let pull = || {
        runner(&["images", "pull", "-p"])
            .arg(fixture("tests/fixtures/tasks/quick"))
            .args(["--min-free-disk-mb", "256"])
            .output()
            .unwrap()
    };
    // The first pull builds the image or finds it; the second always finds it.
    assert!(pull().status.success());
    // The image's size depends on the base image this machine built.
    runner_snapshot!(
        "images-pull-quick",
        pull(),
        (r"\b\d+\.\d MB\b|\b\d+\.\d\b", "[N]")
    );
}
