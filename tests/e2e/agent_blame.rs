//! Issue 29, items 2 and 4 outside the verifier jail, through the real `runner` binary and
//! Docker: the `tasks/hostile-blame` dataset runs once under `--agent oracle` (default retries,
//! so a re-roll would show as a second attempt), and each test checks one promise against that
//! job. An agent that breaks its own environment so that the runner's plumbing fails after it
//! (a disk filled just before it exits, a step's setup sabotaged by the step before, PID 1
//! killed before a network switch, the shell made unusable between steps) ends as its own
//! failure: `agent_error`, no reward, one attempt, nothing under `attempts/`. An agent that
//! replaces `mktemp` and sends an artifact to `.` lands nothing outside `artifacts/`, and
//! 20,000 empty files stop at the entry cap (`--max-download-files 1000` here, so the test
//! stays quick; the same count bounds 2 million).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::oracle_run::{OracleRun, flags};
use crate::support::{exception, reward};

/// The entry cap the job runs under.
const ENTRY_CAP: u64 = 1000;

fn blame() -> &'static OracleRun {
    static RUN: OnceLock<OracleRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let caps = flags(&[
            ("--n-concurrent", "3".to_owned()),
            ("--max-download-files", ENTRY_CAP.to_string()),
        ]);
        OracleRun::of("hostile-blame", "hostile", "blame", &caps)
    })
}

/// Asserts that `task` ended as the agent's `kind`: no reward, `agent_error`, one attempt
/// and no earlier attempt kept aside.
fn assert_agents_failure(run: &OracleRun, task: &str, kind: &str) {
    let result = run.result(task);
    assert_eq!(
        exception(result).as_deref(),
        Some(kind),
        "{task}: {result:#}"
    );
    assert_eq!(result["outcome"], "agent_error", "{task}: {result:#}");
    assert_eq!(reward(result), None, "{task}: {result:#}");
    assert_eq!(result["attempts"], 1, "{task}: never retried: {result:#}");
    assert!(
        !run.dir(task).join("attempts").exists(),
        "{task}: nothing hidden under attempts/"
    );
}

#[test]
fn no_trial_of_the_dataset_is_an_infrastructure_error() {
    let run = blame();
    assert_eq!(run.results.len(), 6, "{:?}", run.results.keys());
    assert_eq!(run.code, Some(0), "no missing data: {}", run.stderr);
    for (task, result) in &run.results {
        assert_ne!(result["outcome"], "infra_error", "{task}: {result:#}");
    }
}

#[test]
fn a_disk_filled_just_before_the_agent_exits_is_the_agents_failure() {
    let run = blame();
    assert_agents_failure(run, "fill-and-exit", "StorageLimitExceededError");
    let result = run.result("fill-and-exit");
    assert_eq!(result["config"]["limits"]["storage_mb"], 64);
    // A task that sets no storage limit gets Harbor's default, recorded.
    let other = run.result("many-empty-files");
    assert_eq!(other["config"]["limits"]["storage_mb"], 10240, "{other:#}");
}

#[test]
fn a_step_setup_sabotaged_by_the_step_before_is_the_agents_failure() {
    let run = blame();
    assert_agents_failure(run, "sabotaged-step-setup", "StepSetupError");
    let steps = run.result("sabotaged-step-setup")["step_results"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert_eq!(steps[0]["verifier_result"]["rewards"]["reward"], 1.0);
    assert!(
        steps[1]["exception_info"]["exception_message"]
            .as_str()
            .unwrap()
            .contains("setup.sh exited with code 1"),
        "{steps:#?}"
    );
}

#[test]
fn a_pid_1_killed_before_the_network_switch_is_the_agents_failure() {
    let run = blame();
    let task = "kill-before-switch";
    let result = run.result(task);
    // Docker switches a stopped container's network without complaint, so what fails next
    // is the verification (VerifierKilledError); on an engine whose switch fails it is the
    // switch, questioned as BrokenEnvironmentError (runner/engine/tests/blame.rs). The
    // agent's either way, never a retried infrastructure error.
    let kind = exception(result).unwrap_or_default();
    assert!(
        ["VerifierKilledError", "BrokenEnvironmentError"].contains(&kind.as_str()),
        "{result:#}"
    );
    assert_agents_failure(run, task, &kind);
}

#[test]
fn root_made_unusable_between_steps_is_the_agents_failure() {
    let run = blame();
    let task = "exec-broken-between-steps";
    assert_agents_failure(run, task, "BrokenEnvironmentError");
    let message = run.result(task)["exception_info"]["exception_message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("the runner's own commands cannot run in the container any more"),
        "{message}"
    );
}

#[test]
fn an_artifact_sent_to_dot_through_a_replaced_mktemp_lands_only_in_artifacts() {
    let run = blame();
    let task = "artifact-dot-mktemp";
    let result = run.result(task);
    let dir = run.dir(task);
    // The tests always write 0; the planted reward.json never reached verifier/.
    assert_eq!(reward(result), Some(0.0), "{result:#}");
    assert!(!dir.join("verifier/reward.json").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("artifacts/out.txt")).unwrap(),
        "honest\n",
        "the artifact is the agent's file, under its own name in artifacts/"
    );
    // Nothing the planted directory held is anywhere outside artifacts/.
    let mut outside = Vec::new();
    for path in files_under(dir) {
        if path.starts_with(dir.join("artifacts")) {
            continue;
        }
        let text = std::fs::read(&path).unwrap_or_default();
        let canary = b"PLANTED-CANARY-7f3a";
        if text.windows(canary.len()).any(|w| w == canary) || path.ends_with("canary.txt") {
            outside.push(path);
        }
    }
    assert!(
        outside.is_empty(),
        "planted files outside artifacts/: {outside:?}"
    );
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("artifacts/manifest.json")).unwrap(),
    )
    .unwrap();
    let entry = manifest
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["source"] == "/app/out.txt")
        .unwrap();
    assert_eq!(entry["destination"], "artifacts/out.txt", "{manifest:#}");
    assert_eq!(entry["status"], "ok", "{manifest:#}");
}

#[test]
fn empty_files_are_bounded_by_the_entry_cap() {
    let run = blame();
    let task = "many-empty-files";
    let result = run.result(task);
    assert_eq!(reward(result), Some(1.0), "{result:#}");
    assert_eq!(
        result["config"]["limits"]["download_cap_entries"],
        ENTRY_CAP
    );
    let capped: Vec<&serde_json::Value> = result["truncated_outputs"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter(|t| t["cap_entries"] == ENTRY_CAP)
                .collect()
        })
        .unwrap_or_default();
    assert!(!capped.is_empty(), "{result:#}");
    // One budget for the trial's logs and artifacts: at most the cap, whatever each held.
    let dir = run.dir(task);
    let brought: usize = ["agent/empty", "artifacts/empty"]
        .iter()
        .map(|sub| std::fs::read_dir(dir.join(sub)).map_or(0, |d| d.count()))
        .sum();
    assert!(
        brought as u64 <= ENTRY_CAP,
        "{brought} entries came back past a cap of {ENTRY_CAP}"
    );
    assert!(brought > 0, "the cap stops a flood, not every download");
}

/// Every file under `dir`, recursively (links not followed).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(path),
                Ok(_) => out.push(path),
                Err(_) => {}
            }
        }
    }
    out
}
