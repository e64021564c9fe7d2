//! `verify` end to end against the fake sandbox: the real command sequence, the in-container
//! listing and removal, the download and the host-side reads.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tasks::records::NamedCheck;
use testkit::{FakeSandbox, TaskFixture};

struct Fixture {
    _tmp: tempfile::TempDir,
    sandbox: FakeSandbox,
    task: tasks::Task,
    trial_dir: std::path::PathBuf,
}

fn fixture(test_sh: &str, extra_toml: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let sandbox = FakeSandbox::new();
    let task = TaskFixture::new("test/verify")
        .test_sh(test_sh)
        .toml(extra_toml)
        .file("tests/helper.txt", "uploaded with the tests\n")
        .write(&tmp.path().join("task"));
    let trial_dir = tmp.path().join("trial");
    std::fs::create_dir_all(&trial_dir).unwrap();
    Fixture {
        _tmp: tmp,
        sandbox,
        task,
        trial_dir,
    }
}

impl Fixture {
    async fn verify(
        &self,
        budget: Duration,
    ) -> Result<verifiers::VerifierOutcome, verifiers::VerifierError> {
        let mut notes = verifiers::VerifyNotes::default();
        let outcome = verifiers::verify(
            &self.sandbox,
            &self.task,
            &self.trial_dir,
            Instant::now() + budget,
            &mut notes,
        )
        .await;
        // The fake sandbox cannot isolate: once the tests run, that is recorded, never skipped.
        if outcome.is_ok() {
            let isolation = notes
                .isolation
                .expect("isolation is recorded when the tests ran");
            assert!(!isolation.isolated);
            assert!(
                isolation
                    .detail
                    .contains("cannot run the verifier isolated")
            );
        }
        outcome
    }

    fn host_verifier_file(&self, name: &str) -> std::path::PathBuf {
        self.trial_dir.join("verifier").join(name)
    }
}

const SECOND_TRY: Duration = Duration::from_secs(30);

#[tokio::test]
async fn reward_txt_exit_code_and_pytest_checks_are_recorded() {
    let f = fixture(
        r#"cat "/tests/helper.txt"
echo "=== short test summary info ==="
echo "PASSED test_outputs.py::test_a"
echo "FAILED test_outputs.py::test_b - AssertionError"
echo 1 > "/logs/verifier/reward.txt"
exit 3"#,
        "",
    );
    let outcome = f.verify(SECOND_TRY).await.unwrap();
    let result = outcome.result;
    assert_eq!(
        result.rewards,
        Some(BTreeMap::from([("reward".into(), 1.0)]))
    );
    assert_eq!(
        result.test_exit_code,
        Some(3),
        "the exit code is recorded but does not change the reward"
    );
    assert_eq!(
        result.checks,
        Some(vec![
            NamedCheck {
                name: "test_outputs.py::test_a".into(),
                status: "passed".into()
            },
            NamedCheck {
                name: "test_outputs.py::test_b".into(),
                status: "failed".into()
            },
        ])
    );
    assert_eq!(
        (result.assertions_passed, result.assertions_total),
        (Some(1), Some(2))
    );
    let stdout = std::fs::read_to_string(f.host_verifier_file("test-stdout.txt")).unwrap();
    assert!(
        stdout.contains("uploaded with the tests"),
        "tests/ was uploaded to /tests: {stdout}"
    );
    assert!(outcome.exec_time >= outcome.test_elapsed);
}

#[tokio::test]
async fn reward_json_wins_and_ctrf_checks_are_parsed() {
    let f = fixture(
        r#"echo 0 > "/logs/verifier/reward.txt"
echo '{"reward": 1.0, "correctness": 0.5}' > "/logs/verifier/reward.json"
echo '{"results": {"tests": [{"name": "c1", "status": "passed"}, {"name": "c2", "status": "skipped"}]}}' \
  > "/logs/verifier/ctrf.json""#,
        "",
    );
    let result = f.verify(SECOND_TRY).await.unwrap().result;
    assert_eq!(
        result.rewards,
        Some(BTreeMap::from([
            ("reward".into(), 1.0),
            ("correctness".into(), 0.5)
        ]))
    );
    assert_eq!(result.checks.as_ref().map(Vec::len), Some(2));
    assert_eq!(
        (result.assertions_passed, result.assertions_total),
        (Some(1), Some(1))
    );
}

#[tokio::test]
async fn verifier_env_templates_are_resolved() {
    let f = fixture(
        r#"[ "$GREETING" = "hi there" ] && [ "$LITERAL" = 'a-${B}' ] && echo 1 > "/logs/verifier/reward.txt""#,
        "[verifier.env]\nGREETING = \"${RUNNER_VERIFIERS_TEST_SURELY_UNSET:-hi there}\"\nLITERAL = \"a-${B}\"",
    );
    let result = f.verify(SECOND_TRY).await.unwrap().result;
    assert_eq!(
        result.rewards,
        Some(BTreeMap::from([("reward".into(), 1.0)]))
    );
}

#[tokio::test]
async fn unresolvable_env_template_fails_before_anything_runs() {
    let f = fixture(
        "echo 1 > \"/logs/verifier/reward.txt\"",
        "[verifier.env]\nKEY = \"${RUNNER_VERIFIERS_TEST_SURELY_UNSET}\"",
    );
    let err = f.verify(SECOND_TRY).await.unwrap_err();
    assert_eq!(err.exception_type(), "VerifierEnvError");
    assert!(
        err.to_string()
            .contains("RUNNER_VERIFIERS_TEST_SURELY_UNSET"),
        "{err}"
    );
    assert!(!f.sandbox.path("/tests").exists(), "nothing was uploaded");
}

#[tokio::test]
async fn missing_reward_is_typed_and_keeps_the_exit_code() {
    let f = fixture("echo 'PASSED t::a'; exit 0", "");
    let err = f.verify(SECOND_TRY).await.unwrap_err();
    assert_eq!(err.exception_type(), "RewardFileNotFoundError");
    let partial = err
        .partial
        .expect("the tests ran, so the partial result is kept");
    assert_eq!(partial.test_exit_code, Some(0));
    assert_eq!(partial.rewards, None);
    assert_eq!(partial.assertions_total, Some(1));
}

#[tokio::test]
async fn rewards_and_files_planted_before_verification_are_cleared() {
    let f = fixture(
        "test -e \"/tests/json.py\" && echo planted-survived; exit 0",
        "",
    );
    // What an agent could leave behind during its phase.
    std::fs::write(f.sandbox.path("/logs/verifier/reward.txt"), "1\n").unwrap();
    std::fs::create_dir_all(f.sandbox.path("/tests")).unwrap();
    std::fs::write(f.sandbox.path("/tests/json.py"), "raise SystemExit(0)\n").unwrap();
    let err = f.verify(SECOND_TRY).await.unwrap_err();
    assert_eq!(
        err.exception_type(),
        "RewardFileNotFoundError",
        "the agent's reward must not count"
    );
    let stdout = std::fs::read_to_string(f.host_verifier_file("test-stdout.txt")).unwrap();
    assert!(
        !stdout.contains("planted-survived"),
        "/tests was emptied before the upload"
    );
}

#[tokio::test]
async fn symlinked_reward_is_refused_and_never_downloaded() {
    let f = fixture(
        r#"echo 1 > "/secret"; ln -s "/secret" "/logs/verifier/reward.txt""#,
        "",
    );
    let err = f.verify(SECOND_TRY).await.unwrap_err();
    assert_eq!(err.exception_type(), "RewardFileUnsafeError");
    assert!(
        err.to_string().contains("/logs/verifier/reward.txt")
            && err.to_string().contains("symbolic link"),
        "{err}"
    );
    assert!(
        std::fs::symlink_metadata(f.host_verifier_file("reward.txt")).is_err(),
        "the link was not materialized"
    );
    assert!(
        std::fs::symlink_metadata(f.sandbox.path("/logs/verifier/reward.txt")).is_err(),
        "removed in the container"
    );
    assert!(
        f.host_verifier_file("test-stdout.txt").exists(),
        "the rest was still downloaded"
    );
}

#[tokio::test]
async fn fifo_reward_is_refused_without_hanging() {
    let f = fixture(r#"mkfifo "/logs/verifier/reward.json""#, "");
    let started = Instant::now();
    let err = f.verify(SECOND_TRY).await.unwrap_err();
    assert_eq!(err.exception_type(), "RewardFileUnsafeError");
    assert!(err.to_string().contains("fifo"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(std::fs::symlink_metadata(f.host_verifier_file("reward.json")).is_err());
}

#[tokio::test]
async fn oversized_reward_is_refused_and_never_downloaded() {
    let f = fixture(
        r#"head -c 70000 /dev/zero | tr '\0' '1' > "/logs/verifier/reward.txt""#,
        "",
    );
    let err = f.verify(SECOND_TRY).await.unwrap_err();
    assert_eq!(err.exception_type(), "RewardFileUnsafeError");
    assert!(err.to_string().contains("70000 bytes"), "{err}");
    assert!(!f.host_verifier_file("reward.txt").exists());
    assert!(
        !f.sandbox.path("/logs/verifier/reward.txt").exists(),
        "removed in the container before the download"
    );
}

#[tokio::test]
async fn verifier_dir_replaced_by_a_symlink_is_refused() {
    let f = fixture(
        r#"mkdir -p "/elsewhere"; echo 1 > "/elsewhere/reward.txt"; rm -rf "/logs/verifier"; ln -s "/elsewhere" "/logs/verifier""#,
        "",
    );
    let err = f.verify(SECOND_TRY).await.unwrap_err();
    assert_eq!(err.exception_type(), "RewardFileUnsafeError");
    assert!(
        !f.host_verifier_file("reward.txt").exists(),
        "nothing behind the link was downloaded"
    );
}

#[tokio::test]
async fn deadline_kills_the_tests_and_salvages_their_output() {
    let f = fixture(
        r#"echo started; sleep 30; echo 1 > "/logs/verifier/reward.txt""#,
        "",
    );
    let started = Instant::now();
    let err = f.verify(Duration::from_secs(1)).await.unwrap_err();
    assert_eq!(err.exception_type(), "VerifierTimeoutError");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.to_string().contains("timeout_sec"), "{err}");
    let stdout = std::fs::read_to_string(f.host_verifier_file("test-stdout.txt")).unwrap();
    assert_eq!(stdout.trim(), "started");
    assert!(!f.host_verifier_file("reward.txt").exists());
}

impl Fixture {
    /// Verifies as a separate verifier does: with the tests the "image" holds at `/tests`.
    async fn verify_with_image_tests(
        &self,
    ) -> Result<verifiers::VerifierOutcome, verifiers::VerifierError> {
        let mut notes = verifiers::VerifyNotes::default();
        let outcome = verifiers::verify_with_image_tests(
            &self.sandbox,
            &self.task,
            None,
            &self.trial_dir,
            Instant::now() + SECOND_TRY,
            &mut notes,
        )
        .await;
        if outcome.is_ok() {
            assert!(notes.isolation.expect("recorded").isolated);
        }
        outcome
    }
}

#[tokio::test]
async fn a_separate_verifier_runs_its_images_tests_and_uploads_none() {
    let f = fixture(r#"echo 0 > "/logs/verifier/reward.txt""#, "");
    let tests = f.sandbox.path("/tests");
    std::fs::create_dir_all(&tests).unwrap();
    // Not executable, as a COPY may leave it: the verifier makes it so.
    std::fs::write(
        tests.join("test.sh"),
        "#!/bin/bash\ncat /tests/helper.txt 2>&1; echo 1 > /logs/verifier/reward.txt\n",
    )
    .unwrap();
    let outcome = f.verify_with_image_tests().await.unwrap();
    assert_eq!(
        outcome.result.rewards,
        Some(BTreeMap::from([("reward".into(), 1.0)])),
        "the image's test.sh ran, not the task's"
    );
    let stdout = std::fs::read_to_string(f.host_verifier_file("test-stdout.txt")).unwrap();
    assert!(
        stdout.contains("No such file"),
        "the task's tests/ was not uploaded: {stdout}"
    );
}

#[tokio::test]
async fn a_separate_verifier_image_without_tests_is_an_add_tests_dir_error() {
    let f = fixture(r#"echo 1 > "/logs/verifier/reward.txt""#, "");
    let err = f.verify_with_image_tests().await.unwrap_err();
    assert_eq!(err.exception_type(), "AddTestsDirError");
    assert!(err.to_string().contains("COPY them to /tests"), "{err}");
    assert!(!f.sandbox.path("/tests/test.sh").exists());
}
