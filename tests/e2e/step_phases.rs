//! Multi-step tasks whose phases run apart, against the real Docker engine: each step verified
//! in a separate verifier environment (task-level, and from the step's own tests directory)
//! that sees the declared artifacts and none of the agent's decoys; and per-phase networks
//! switched per step (the task's modes, then a step's own), proved from inside the container
//! by interfaces, routes and the trial's own sidecar. Oracle 1, nop 0, nothing left behind.

use std::path::PathBuf;

use crate::compose::run;
use crate::steps::step_summary;
use crate::support::{exception, reward, workspace_root};

/// The fixture task `tests/fixtures/tasks/<name>`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures/tasks").join(name)
}

fn both_steps(names: [&str; 2]) -> Vec<(String, Option<f64>)> {
    names.map(|n| (n.to_owned(), Some(1.0))).into()
}

#[test]
fn each_step_is_verified_apart_with_its_artifacts_and_without_the_decoys() {
    let (_jobs, job) = run(&fixture("steps-separate-verifier"), "oracle");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{}", result["exception_info"]);
    assert_eq!(step_summary(result), both_steps(["one", "two"]));
    assert_eq!(reward(result), Some(1.0));
    for (step, checks) in [
        (
            "one",
            &[
                "verifier_image",
                "no_decoy",
                "step_artifact",
                "tests_from_image",
            ][..],
        ),
        (
            "two",
            &[
                "verifier_image",
                "no_decoy",
                "no_second_decoy",
                "not_step_ones_artifact",
                "not_step_ones_logs",
                "logs_artifact",
            ][..],
        ),
    ] {
        let stdout = job.trial_file(name, &format!("steps/{step}/verifier/test-stdout.txt"));
        assert!(!stdout.contains("FAIL"), "{step}: {stdout}");
        for check in checks {
            assert!(
                stdout.contains(&format!("PASS {check}")),
                "{step}: {stdout}"
            );
        }
        let manifest = job.trial_file(name, &format!("steps/{step}/artifacts/manifest.json"));
        assert!(manifest.contains(&format!("/app/{step}.txt")), "{manifest}");
    }
    let log = job.trial_file(name, "trial.log");
    assert_eq!(
        log.matches("started the separate verifier environment")
            .count(),
        2,
        "one verifier environment per step: {log}"
    );
    assert!(
        log.contains("artifact /app/two.txt: uploaded to the verifier"),
        "{log}"
    );

    let (_jobs, job) = run(&fixture("steps-separate-verifier"), "nop");
    let (_, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{}", result["exception_info"]);
    assert_eq!(step_summary(result), [("one".to_owned(), Some(0.0))]);
    assert_eq!(reward(result), Some(0.0));
}

#[test]
fn each_steps_phases_run_under_their_own_network() {
    let (_jobs, job) = run(&fixture("steps-network"), "oracle");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{}", result["exception_info"]);
    assert_eq!(step_summary(result), both_steps(["offline", "online"]));
    assert_eq!(reward(result), Some(1.0));
    let offline = job.trial_file(name, "steps/offline/verifier/test-stdout.txt");
    assert!(
        offline.contains("agent: unreachable\nlo\nnone"),
        "{offline}"
    );
    assert!(offline.contains("verifier: reached"), "{offline}");
    let online = job.trial_file(name, "steps/online/verifier/test-stdout.txt");
    assert!(online.contains("agent: reached"), "{online}");
    assert!(
        online.contains("verifier: unreachable\nlo\nnone"),
        "{online}"
    );
    let log = job.trial_file(name, "trial.log");
    for switch in [
        // Step `offline`: the task's modes, each phase's baseline restored after it.
        "network public -> no-network for the agent run",
        "network no-network -> public for the rest of the step",
        // Step `online`: its own modes.
        "network public -> no-network for the verifier",
        "network no-network -> public for the next step",
    ] {
        assert!(log.contains(switch), "{switch}: {log}");
    }

    let (_jobs, job) = run(&fixture("steps-network"), "nop");
    let (_, result) = &job.trial_results()[0];
    assert_eq!(step_summary(result), [("offline".to_owned(), Some(0.0))]);
    assert_eq!(reward(result), Some(0.0));
}
