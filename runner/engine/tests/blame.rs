//! Whose failure it was, through the trial state machine on the fake backend (issue 29, item
//! 2): a failure of the runner's own plumbing after the agent had the container is the
//! agent's when the container's state caused it (PID 1 stopped from inside, the shell made
//! unusable, a step's setup sabotaged): `agent_error`, no reward, one attempt, even with
//! retries on. The same failure from the engine, in a healthy container, stays an
//! infrastructure error and is retried. The fake models the agent's doings with marker files
//! (`testkit::backend::{STOPPED_MARKER, BROKEN_SHELL_MARKER}`). Item 4 (an artifact's destination
//! never reaches outside `artifacts/`) is tested with the collection, in the engine's
//! `trial/artifacts_tests.rs`.

use std::path::Path;
use std::time::Duration;

use adapter::AnyAgent;
use engine::job::RetryPolicy;
use tasks::records::TrialResult;
use tasks::{Dataset, ExceptionType, TrialOutcome};
use testkit::backend::{BROKEN_SHELL_MARKER, STOPPED_MARKER};
use testkit::{FakeBackend, TaskFixture};

const REWARD_1: &str = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n";

struct Ran {
    result: TrialResult,
    trial_dir: std::path::PathBuf,
    started: usize,
    _dir: tempfile::TempDir,
}

impl Ran {
    fn exception(&self) -> Option<ExceptionType> {
        let info = self.result.exception_info.as_ref();
        info.map(|e| e.exception_type.clone())
    }

    /// The trial ended as the agent's `kind`, with no reward and no retry; returns the
    /// exception's message.
    fn assert_agents(&self, kind: ExceptionType) -> &str {
        assert_eq!(self.exception(), Some(kind), "{:#?}", self.result);
        assert_eq!(self.result.outcome, Some(TrialOutcome::AgentError));
        assert_eq!(self.result.reward(), None);
        assert_eq!(self.result.attempts, Some(1), "never retried");
        assert_eq!(self.started, 1, "one environment");
        assert!(!self.trial_dir.join("attempts").exists());
        &self
            .result
            .exception_info
            .as_ref()
            .unwrap()
            .exception_message
    }
}

/// Runs the one task of `dataset` under the oracle, with two quick retries.
async fn run(dir: tempfile::TempDir, dataset: Dataset, backend: FakeBackend) -> Ran {
    let agent = AnyAgent::builtin("oracle").unwrap();
    let mut settings = testkit::job_settings(dir.path(), "job", &agent, 1);
    let mut retry = RetryPolicy::new(2, &[], None).unwrap();
    retry.min_wait = Duration::from_millis(10);
    settings.retry = retry;
    let (trial_dir, result) =
        testkit::run_one_trial(dir.path(), backend.clone(), agent, &dataset, &settings).await;
    Ran {
        trial_dir,
        result,
        started: backend.tally().started.len(),
        _dir: dir,
    }
}

fn load(root: &Path) -> Dataset {
    Dataset::load(&root.join("dataset")).expect("the fixture dataset loads")
}

/// A two-step task (no gate) whose steps' files are `files`.
fn two_steps(root: &Path, files: &[(&str, &str)]) -> Dataset {
    let mut fixture = TaskFixture::new("test/steps").file(
        "task.toml",
        "[task]\nname = \"test/steps\"\n[[steps]]\nname = \"one\"\n[[steps]]\nname = \"two\"\n",
    );
    for step in ["one", "two"] {
        fixture = fixture
            .file(&format!("steps/{step}/instruction.md"), "Do.\n")
            .file(&format!("steps/{step}/tests/test.sh"), REWARD_1)
            .file(
                &format!("steps/{step}/solution/solve.sh"),
                "#!/bin/bash\ntrue\n",
            );
    }
    for (path, text) in files {
        fixture = fixture.file(path, text);
    }
    fixture.write(&root.join("dataset/steps"));
    load(root)
}

#[tokio::test]
async fn a_container_stopped_from_inside_before_a_network_switch_is_the_agents_failure() {
    let dir = tempfile::tempdir().unwrap();
    TaskFixture::new("test/offline")
        .toml("[agent]\nnetwork_mode = \"no-network\"\n[verifier]\nnetwork_mode = \"public\"")
        .test_sh("echo 1 > /logs/verifier/reward.txt")
        .file(
            "solution/solve.sh",
            &format!("#!/bin/bash\ntouch {STOPPED_MARKER}\n"),
        )
        .write(&dir.path().join("dataset/offline"));
    let dataset = load(dir.path());
    let ran = run(dir, dataset, FakeBackend::new()).await;
    let message = ran.assert_agents(ExceptionType::BrokenEnvironmentError);
    assert!(
        message.contains("the trial's container stopped before the runner was done with it")
            && message.contains("exited with 143"),
        "{message}"
    );
    // The error it replaced is kept in the message.
    assert!(
        message.contains("the runner's work failed because of it: "),
        "{message}"
    );
    let exception_txt = std::fs::read_to_string(ran.trial_dir.join("exception.txt")).unwrap();
    assert!(
        exception_txt.starts_with("BrokenEnvironmentError: "),
        "{exception_txt}"
    );
}

#[tokio::test]
async fn a_shell_broken_under_the_runners_step_plumbing_is_the_agents_failure() {
    let dir = tempfile::tempdir().unwrap();
    // Broken at the end of step one's tests (by then a leftover of the agent could do it):
    // the runner's own listing of /logs/verifier fails, a VerifierSandboxError until asked.
    let breaks =
        format!("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\ntouch {BROKEN_SHELL_MARKER}\n");
    let dataset = two_steps(dir.path(), &[("steps/one/tests/test.sh", &breaks)]);
    let ran = run(dir, dataset, FakeBackend::new()).await;
    let message = ran.assert_agents(ExceptionType::BrokenEnvironmentError);
    assert!(
        message.contains("the runner's own commands cannot run in the container any more")
            && message.contains("exited 126"),
        "{message}"
    );
    let steps = ran.result.step_results.as_ref().unwrap();
    assert_eq!(
        steps
            .last()
            .unwrap()
            .exception_info
            .as_ref()
            .map(|e| &e.exception_type),
        Some(&ExceptionType::BrokenEnvironmentError),
        "the step's record says the same"
    );
}

#[tokio::test]
async fn a_step_setup_sabotaged_by_the_step_before_is_the_agents_zero_not_the_mean_of_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = two_steps(
        dir.path(),
        &[
            (
                "steps/one/solution/solve.sh",
                "#!/bin/bash\nrm -f /workspace/seed\n",
            ),
            (
                "steps/one/workdir/setup.sh",
                "#!/bin/bash\nmkdir -p /workspace && echo seeded > /workspace/seed\n",
            ),
            (
                "steps/two/workdir/setup.sh",
                "#!/bin/bash\ntest -f /workspace/seed\n",
            ),
        ],
    );
    let ran = run(dir, dataset, FakeBackend::new()).await;
    // Harbor's mean over the verified steps would have made it 1.0: breaking step two's
    // setup would pay better than failing it.
    ran.assert_agents(ExceptionType::StepSetupError);
    let steps = ran.result.step_results.as_ref().unwrap();
    assert_eq!(steps[0].rewards().and_then(|r| r.get("reward")), Some(&1.0));
    assert!(steps[1].verifier_result.is_none());
}

#[tokio::test]
async fn an_engine_failure_in_a_healthy_container_stays_infrastructure_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = two_steps(dir.path(), &[]);
    let backend = FakeBackend::new();
    // A step's reset fails once, as a dropped engine connection would; the container and its
    // shell are fine.
    backend.script(|s| s.exec_fault_once = Some("find /logs/agent /logs/artifacts".into()));
    let ran = run(dir, dataset, backend).await;
    assert_eq!(ran.exception(), None, "{:#?}", ran.result);
    assert_eq!(ran.result.reward(), Some(1.0));
    assert_eq!(ran.result.attempts, Some(2), "retried once");
    let kept = std::fs::read_to_string(ran.trial_dir.join("attempts/1/result.json")).unwrap();
    assert!(kept.contains("\"EnvironmentError\""), "{kept}");
    assert!(kept.contains("infra_error"), "{kept}");
}
