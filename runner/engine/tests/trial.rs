//! The trial state machine on the fake backend: every phase's success and failure paths end in
//! the right `exception_info`, phase timings and environment removal. No Docker is involved
//! (run with `DOCKER_HOST=unix:///nonexistent` to see).

use std::path::{Path, PathBuf};
use std::time::Duration;

use adapter::{AnyAgent, InstalledAgent, InstalledAgentConfig};
use engine::BackendErrorKind;
use engine::events::{Event, Phase};
use engine::job::resume::{ResumeReport, parse_selectors, resume};
use engine::job::{JobOutcome, JobSettings, RetryPolicy, plan_job, run_job};
use tasks::isolation::IsolatedVerifyOutcome;
use tasks::records::TrialResult;
use tasks::{Dataset, ExceptionType, Multipliers};
use testkit::backend::{Script, Tally, fault};
use testkit::{FakeBackend, TaskFixture};
use tokio_util::sync::CancellationToken;

const REWARD_IF_DONE: &str = "if [ -f /workspace/done ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi";

/// A one-task dataset whose solution marks the work done after `solve_sleep` seconds.
fn task(dir: &Path, solve_sleep: f64, test_sh: &str, toml: &str) -> Dataset {
    TaskFixture::new("test/demo")
        .toml(toml)
        .test_sh(test_sh)
        .file(
            "solution/solve.sh",
            &format!(
                "#!/bin/bash\nsleep {solve_sleep}\nmkdir -p /workspace && touch /workspace/done\n"
            ),
        )
        .write(&dir.join("dataset/demo"));
    Dataset::load(&dir.join("dataset")).expect("the fixture dataset loads")
}

struct Run {
    outcome: JobOutcome,
    /// The full records the job wrote (its outcome keeps totals only).
    records: Vec<TrialResult>,
    tally: Tally,
    job_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn only(&self) -> &TrialResult {
        assert_eq!(self.records.len(), 1, "one trial");
        &self.records[0]
    }

    fn exception(&self) -> Option<ExceptionType> {
        self.only()
            .exception_info
            .as_ref()
            .map(|e| e.exception_type.clone())
    }

    /// Every environment the backend started was removed, once.
    fn assert_nothing_left(&self) {
        assert_eq!(self.tally.started, self.tally.removed, "{:?}", self.tally);
        assert_eq!(self.tally.sweeps, 1, "the job sweeps once at its end");
    }

    fn trial_file(&self, name: &str) -> String {
        let trial = &self.only().trial_name;
        std::fs::read_to_string(self.job_dir.join(trial).join(name)).unwrap_or_default()
    }
}

struct Options {
    agent: AnyAgent,
    k: u32,
    multipliers: Multipliers,
    cancel_at: Option<Phase>,
    retry: RetryPolicy,
    grace: Duration,
    /// Resume the job dir with these `--retry-failed` values instead of starting it.
    resume: Option<Vec<String>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            agent: AnyAgent::builtin("oracle").unwrap(),
            k: 1,
            multipliers: Multipliers::default(),
            cancel_at: None,
            retry: RetryPolicy::none(),
            grace: Duration::from_secs(120),
            resume: None,
        }
    }
}

fn settings(dir: &Path, options: &Options) -> JobSettings {
    let mut settings = testkit::job_settings(dir, "job", &options.agent, options.k);
    settings.n_concurrent = 2;
    settings.multipliers = options.multipliers;
    settings.retry = options.retry.clone();
    settings.watchdog_grace = options.grace;
    settings
}

async fn run(
    dir: tempfile::TempDir,
    dataset: Dataset,
    backend: FakeBackend,
    options: Options,
) -> Run {
    let (outcome, _) = run_at(dir.path(), &dataset, &backend, options).await;
    let job_dir = dir.path().join("jobs/job");
    Run {
        records: testkit::records::on_disk(&job_dir, &outcome.results),
        outcome,
        tally: backend.tally(),
        job_dir: dir.path().join("jobs/job"),
        _dir: dir,
    }
}

/// Runs (or resumes) the job `<dir>/jobs/job` and returns its outcome and the resume report.
async fn run_at(
    dir: &Path,
    dataset: &Dataset,
    backend: &FakeBackend,
    options: Options,
) -> (JobOutcome, Option<ResumeReport>) {
    let job_dir = dir.join("jobs/job");
    let settings = settings(dir, &options);
    let mut plan = plan_job(dataset, &settings);
    let report = options.resume.as_ref().map(|names| {
        let selectors = parse_selectors(names).expect("known names");
        resume(&job_dir, &mut plan, &selectors).expect("the job resumes")
    });
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let cancel_at = options.cancel_at;
    let outcome = run_job(
        backend.clone(),
        options.agent,
        plan,
        job_dir.clone(),
        &settings,
        cancel,
        move |event| {
            if let Event::Phase { phase, .. } = &event.event
                && Some(*phase) == cancel_at
            {
                trigger.cancel();
            }
        },
    )
    .await
    .expect("the job directory is written");
    (outcome, report)
}

/// A fake backend whose script `edit` changed first.
fn scripted_backend(edit: impl FnOnce(&mut Script)) -> FakeBackend {
    let backend = FakeBackend::new();
    backend.script(edit);
    backend
}

/// A backend whose first `n` environment starts fail with `message`.
fn failing_starts(n: usize, message: &str) -> FakeBackend {
    scripted_backend(|s| {
        for _ in 0..n {
            s.start_faults
                .push_back(fault(BackendErrorKind::Start, message));
        }
    })
}

fn fixture(solve_sleep: f64, test_sh: &str, toml: &str) -> (tempfile::TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let dataset = task(dir.path(), solve_sleep, test_sh, toml);
    (dir, dataset)
}

#[tokio::test]
async fn the_oracle_scores_and_every_phase_is_timed_and_torn_down() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let run = run(dir, dataset, FakeBackend::new(), Options::default()).await;
    let result = run.only();
    assert_eq!(result.reward(), Some(1.0));
    assert_eq!(run.exception(), None);
    for (phase, timing) in [
        ("environment", &result.environment_setup),
        ("agent setup", &result.agent_setup),
        ("agent", &result.agent_execution),
        ("verifier", &result.verifier),
    ] {
        let timing = timing
            .as_ref()
            .unwrap_or_else(|| panic!("{phase} was timed"));
        assert!(
            timing.started_at.is_some() && timing.finished_at.is_some(),
            "{phase}"
        );
    }
    run.assert_nothing_left();
    assert_eq!(run.tally.started.len(), 1);
    let on_disk: serde_json::Value = serde_json::from_str(&run.trial_file("result.json")).unwrap();
    assert_eq!(on_disk["verifier_result"]["rewards"]["reward"], 1.0);
    let log = run.trial_file("trial.log");
    for line in [
        "phase: running agent",
        "phase: running verifier",
        "overhead: wall",
    ] {
        assert!(log.contains(line), "trial.log lacks {line:?}:\n{log}");
    }
}

#[tokio::test]
async fn nop_scores_zero_without_an_exception() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let options = Options {
        agent: AnyAgent::builtin("nop").unwrap(),
        ..Options::default()
    };
    let run = run(dir, dataset, FakeBackend::new(), options).await;
    assert_eq!(run.only().reward(), Some(0.0));
    assert_eq!(run.exception(), None);
    run.assert_nothing_left();
}

#[tokio::test]
async fn a_failed_build_fails_every_trial_of_the_task_once_and_starts_nothing() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = scripted_backend(|s| {
        s.image_faults
            .push_back(fault(BackendErrorKind::Build, "RUN apt-get failed"))
    });
    let options = Options {
        k: 2,
        ..Options::default()
    };
    let run = run(dir, dataset, backend, options).await;
    assert_eq!(run.records.len(), 2);
    for result in &run.records {
        let e = result.exception_info.as_ref().expect("an exception");
        assert_eq!(e.exception_type, ExceptionType::SandboxBuildFailedError);
        assert!(e.exception_message.contains("RUN apt-get failed"));
        assert!(
            result
                .environment_setup
                .as_ref()
                .unwrap()
                .finished_at
                .is_some()
        );
        assert!(result.agent_setup.is_none() && result.verifier.is_none());
        assert_eq!(result.reward(), None);
    }
    assert_eq!(
        run.tally.images_prepared, 1,
        "the image is prepared once per task"
    );
    assert!(run.tally.started.is_empty());
    run.assert_nothing_left();
    assert_eq!(run.outcome.unscored(), 2);
}

#[tokio::test]
async fn a_failed_start_is_an_environment_start_error() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = failing_starts(1, "no space left on device");
    let run = run(dir, dataset, backend, Options::default()).await;
    assert_eq!(run.exception(), Some(ExceptionType::EnvironmentStartError));
    assert!(run.only().agent_setup.is_none());
    assert!(run.tally.started.is_empty());
    run.assert_nothing_left();
    assert!(
        run.trial_file("exception.txt")
            .contains("no space left on device")
    );
}

#[tokio::test]
async fn a_start_that_outlives_the_environment_deadline_times_out() {
    let (dir, dataset) = fixture(
        0.0,
        REWARD_IF_DONE,
        "[environment]\nbuild_timeout_sec = 1.0",
    );
    let backend = scripted_backend(|s| s.start_delay = Duration::from_secs(30));
    let run = run(dir, dataset, backend, Options::default()).await;
    assert_eq!(
        run.exception(),
        Some(ExceptionType::EnvironmentStartTimeoutError)
    );
    run.assert_nothing_left();
}

#[tokio::test]
async fn agent_setup_that_outlives_its_deadline_times_out_and_is_torn_down() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let agent_dir = dir.path().join("agent");
    testkit::files::write(&agent_dir, "src/server.py", "print('never started')\n");
    testkit::files::write(
        &agent_dir,
        "agent.toml",
        "name = \"slow-installer\"\nversion = \"1.0.0\"\n[source]\ndir = \"src\"\ninstall_path = \"/opt/slow\"\n\
         [install]\ncommands = [\"sleep 30\"]\n[server]\ncommand = \"python3 {source_dir}/server.py\"\nport = 8765\n[trajectory]\nformat = \"none\"\n",
    );
    let config =
        InstalledAgentConfig::load(&agent_dir.join("agent.toml")).expect("the config loads");
    let agent =
        InstalledAgent::new(config, Default::default(), false, false).expect("the agent packages");
    let options = Options {
        agent: agent.into(),
        // 360 s × 0.01 = 3.6 s for setup.
        multipliers: Multipliers {
            agent_setup_timeout_multiplier: Some(0.01),
            ..Multipliers::default()
        },
        ..Options::default()
    };
    let run = run(dir, dataset, FakeBackend::new(), options).await;
    assert_eq!(run.exception(), Some(ExceptionType::AgentSetupTimeoutError));
    let result = run.only();
    assert!(result.agent_setup.as_ref().unwrap().finished_at.is_some());
    assert!(result.agent_execution.is_none() && result.verifier.is_none());
    run.assert_nothing_left();
}

#[tokio::test]
async fn an_agent_timeout_is_recorded_and_the_verifier_still_scores() {
    let (dir, dataset) = fixture(30.0, REWARD_IF_DONE, "[agent]\ntimeout_sec = 1.0");
    let run = run(dir, dataset, FakeBackend::new(), Options::default()).await;
    assert_eq!(run.exception(), Some(ExceptionType::AgentTimeoutError));
    let result = run.only();
    assert_eq!(
        result.reward(),
        Some(0.0),
        "the verifier ran after the timeout"
    );
    assert!(result.verifier.as_ref().unwrap().finished_at.is_some());
    assert_eq!(
        run.outcome.unscored(),
        0,
        "a timed-out trial with a reward is scored"
    );
    run.assert_nothing_left();
}

#[tokio::test]
async fn a_verifier_error_keeps_the_partial_result() {
    let (dir, dataset) = fixture(0.0, "echo 'PASSED tests/test_x.py::test_a'\nexit 3", "");
    let run = run(dir, dataset, FakeBackend::new(), Options::default()).await;
    assert_eq!(
        run.exception(),
        Some(ExceptionType::RewardFileNotFoundError)
    );
    let verifier = run
        .only()
        .verifier_result
        .as_ref()
        .expect("a partial result");
    assert_eq!(verifier.test_exit_code, Some(3));
    assert_eq!(verifier.rewards, None);
    run.assert_nothing_left();
}

#[tokio::test]
async fn a_panic_inside_a_trial_is_recorded_as_a_runner_error() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = scripted_backend(|s| s.panic_on_start = true);
    let run = run(dir, dataset, backend, Options::default()).await;
    assert_eq!(run.exception(), Some(ExceptionType::RunnerError));
    assert!(run.trial_file("result.json").contains("RunnerError"));
    run.assert_nothing_left();
}

/// Cancels the job as soon as a trial enters `phase`; the phase is held open by a slow image,
/// start, solution or test so the interrupt lands inside it.
async fn cancelled_in(phase: Phase) -> Run {
    let slow_solution = if phase == Phase::Agent { 30.0 } else { 0.0 };
    let test_sh = if phase == Phase::Verifier {
        "sleep 30"
    } else {
        REWARD_IF_DONE
    };
    let (dir, dataset) = fixture(slow_solution, test_sh, "");
    let backend = scripted_backend(|s| match phase {
        Phase::Image => s.image_delay = Duration::from_secs(30),
        Phase::Environment => s.start_delay = Duration::from_secs(30),
        _ => {}
    });
    let options = Options {
        cancel_at: Some(phase),
        ..Options::default()
    };
    run(dir, dataset, backend, options).await
}

#[tokio::test]
async fn an_interrupt_in_any_phase_records_cancelled_and_removes_the_environment() {
    for phase in [
        Phase::Image,
        Phase::Environment,
        Phase::AgentSetup,
        Phase::Agent,
        Phase::Verifier,
    ] {
        let run = cancelled_in(phase).await;
        assert!(run.outcome.interrupted, "{phase:?}");
        assert_eq!(
            run.exception(),
            Some(ExceptionType::CancelledError),
            "{phase:?}"
        );
        let result = run.only();
        assert_eq!(result.reward(), None, "{phase:?}");
        // The phase that was cut short still has a closed timing.
        let timing = match phase {
            Phase::Image | Phase::Environment => &result.environment_setup,
            Phase::AgentSetup | Phase::Agent => &result.agent_setup,
            _ => &result.verifier,
        };
        assert!(
            timing.as_ref().and_then(|t| t.finished_at).is_some(),
            "{phase:?}"
        );
        run.assert_nothing_left();
    }
}

#[tokio::test]
async fn an_interrupt_wins_over_an_agent_timeout_recorded_earlier() {
    let (dir, dataset) = fixture(30.0, "sleep 30", "[agent]\ntimeout_sec = 1.0");
    let options = Options {
        cancel_at: Some(Phase::Verifier),
        ..Options::default()
    };
    let run = run(dir, dataset, FakeBackend::new(), options).await;
    assert_eq!(run.exception(), Some(ExceptionType::CancelledError));
    run.assert_nothing_left();
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Options that retry infrastructure errors up to `max_retries` times, with a backoff short
/// enough for a unit test.
fn quick_retries(max_retries: u32) -> Options {
    let mut policy = RetryPolicy::new(max_retries, &[], None).unwrap();
    policy.min_wait = Duration::from_millis(10);
    Options {
        retry: policy,
        ..Options::default()
    }
}

#[tokio::test]
async fn a_start_failure_on_the_first_attempt_is_retried_and_scored_with_the_attempt_kept() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = failing_starts(1, "the engine said 500");
    let options = quick_retries(2);
    let run = run(dir, dataset, backend, options).await;
    let result = run.only();
    assert_eq!(result.reward(), Some(1.0));
    assert_eq!(run.exception(), None);
    assert_eq!(result.attempts, Some(2));
    assert_eq!(result.outcome, Some(tasks::TrialOutcome::Scored));
    let trial_dir = run.job_dir.join(&result.trial_name);
    let kept = json(&trial_dir.join("attempts/1/result.json"));
    assert_eq!(
        kept["exception_info"]["exception_type"],
        "EnvironmentStartError"
    );
    assert_eq!(kept["outcome"], "infra_error");
    assert_eq!(kept["attempts"], 1);
    assert!(trial_dir.join("attempts/1/trial.log").is_file());
    assert_eq!(json(&trial_dir.join("result.json"))["attempts"], 2);
    let job = json(&run.job_dir.join("result.json"));
    assert_eq!(job["stats"]["n_retries"], 1);
    assert_eq!(job["coverage"]["scored"], 1);
    assert_eq!(job["coverage"]["retries"], 1);
    assert_eq!(job["n_total_trials"], 1);
    let log = std::fs::read_to_string(run.job_dir.join("job.log")).unwrap();
    assert!(log.contains("retry: trial"), "{log}");
    assert!(log.contains("EnvironmentStartError"), "{log}");
    assert!(log.contains(": scored, reward 1"), "{log}");
    run.assert_nothing_left();
}

#[tokio::test]
async fn an_agent_timeout_is_not_retried() {
    let (dir, dataset) = fixture(30.0, REWARD_IF_DONE, "[agent]\ntimeout_sec = 1.0");
    let options = quick_retries(2);
    let run = run(dir, dataset, FakeBackend::new(), options).await;
    assert_eq!(run.exception(), Some(ExceptionType::AgentTimeoutError));
    let result = run.only();
    assert_eq!(result.attempts, Some(1));
    assert_eq!(result.outcome, Some(tasks::TrialOutcome::Scored));
    assert_eq!(run.tally.started.len(), 1, "one environment: no retry");
    assert!(
        !run.job_dir
            .join(&result.trial_name)
            .join("attempts")
            .exists()
    );
}

#[tokio::test]
async fn a_verification_killed_from_inside_the_trial_is_the_agents_failure_and_not_retried() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = scripted_backend(|s| {
        s.isolated_outcome = Some(IsolatedVerifyOutcome::Killed(
            "the helper running the tests was killed by SIGKILL (exit 137)".into(),
        ));
    });
    let run = run(dir, dataset, backend, quick_retries(2)).await;
    assert_eq!(run.exception(), Some(ExceptionType::VerifierKilledError));
    let result = run.only();
    assert_eq!(result.reward(), None);
    assert_eq!(result.attempts, Some(1));
    assert_eq!(result.outcome, Some(tasks::TrialOutcome::AgentError));
    assert_eq!(run.tally.started.len(), 1, "one environment: no retry");
    let message = &result.exception_info.as_ref().unwrap().exception_message;
    assert!(
        message.contains("killed from inside the trial") && message.contains("SIGKILL"),
        "{message}"
    );
    run.assert_nothing_left();
}

#[tokio::test]
async fn a_retried_infra_error_that_persists_ends_as_infra_error_after_every_retry() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = failing_starts(3, "still broken");
    let options = quick_retries(2);
    let run = run(dir, dataset, backend, options).await;
    let result = run.only();
    assert_eq!(result.attempts, Some(3));
    assert_eq!(result.outcome, Some(tasks::TrialOutcome::InfraError));
    let trial_dir = run.job_dir.join(&result.trial_name);
    assert!(trial_dir.join("attempts/2/result.json").is_file());
    assert!(!trial_dir.join("attempts/3").exists());
    assert_eq!(run.outcome.missing(), 1);
}

#[tokio::test]
async fn the_watchdog_ends_a_hung_backend_call_as_an_infrastructure_error() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "[verifier]\ntimeout_sec = 1.0");
    let backend = FakeBackend::new();
    backend.script(|s| s.hang_download_of = Some("/logs/artifacts".into()));
    let options = Options {
        grace: Duration::from_secs(1),
        ..Options::default()
    };
    let started = std::time::Instant::now();
    let run = run(dir, dataset, backend, options).await;
    assert_eq!(run.exception(), Some(ExceptionType::BackendTimeoutError));
    assert_eq!(run.only().outcome, Some(tasks::TrialOutcome::InfraError));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    run.assert_nothing_left();
    let log = run.trial_file("trial.log");
    assert!(log.contains("phase: running verifier started"), "{log}");
    assert!(log.contains("outcome: infra_error"), "{log}");
}

#[tokio::test]
async fn resume_keeps_complete_trials_byte_for_byte_and_reruns_partial_ones() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = FakeBackend::new();
    let first = Options {
        k: 2,
        ..Options::default()
    };
    let (outcome, _) = run_at(dir.path(), &dataset, &backend, first).await;
    assert_eq!(outcome.results.len(), 2);
    let job_dir = dir.path().join("jobs/job");
    let mut names: Vec<String> = outcome
        .results
        .iter()
        .map(|r| r.trial_name.clone())
        .collect();
    names.sort();
    // A kill -9 inside the second trial: its result.json never got written.
    let partial = &names[1];
    std::fs::remove_file(job_dir.join(partial).join("result.json")).unwrap();
    let kept = std::fs::read(job_dir.join(&names[0]).join("result.json")).unwrap();
    let job_id = json(&job_dir.join("result.json"))["id"].clone();
    let again = Options {
        k: 3,
        resume: Some(Vec::new()),
        ..Options::default()
    };
    let (outcome, report) = run_at(dir.path(), &dataset, &backend, again).await;
    let report = report.unwrap();
    assert_eq!((report.complete, report.rerun.len(), report.new), (1, 1, 1));
    assert_eq!(report.rerun[0].0, *partial);
    assert_eq!(outcome.results.len(), 3);
    assert_eq!(outcome.coverage.scored, 3);
    assert_eq!(
        std::fs::read(job_dir.join(&names[0]).join("result.json")).unwrap(),
        kept,
        "a complete trial is never touched"
    );
    let rerun = json(&job_dir.join(partial).join("result.json"));
    assert_eq!(rerun["attempts"], 2);
    assert!(
        job_dir
            .join(partial)
            .join("attempts/1/config.json")
            .is_file()
    );
    assert!(
        !job_dir
            .join(partial)
            .join("attempts/1/result.json")
            .exists()
    );
    let trial_dirs = std::fs::read_dir(&job_dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(trial_dirs, 3);
    let job = json(&job_dir.join("result.json"));
    assert_eq!(job["id"], job_id, "the job keeps its id");
    assert_eq!(job["n_total_trials"], 3);
    assert_eq!(job["stats"]["n_completed_trials"], 3);
    assert_eq!(json(&job_dir.join("config.json"))["n_attempts"], 3);
    assert_eq!(
        json(&job_dir.join("lock.json"))["trials"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        backend.tally().started.len(),
        4,
        "two trials in the first run, two in the resume"
    );
    assert_eq!(
        backend.tally().sweeps,
        3,
        "the resume sweeps what the killed run left before it starts, and again at its end"
    );
}

#[tokio::test]
async fn retry_failed_reruns_trials_of_that_family_and_keeps_the_old_attempt() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = failing_starts(1, "no space left on device");
    let (outcome, _) = run_at(dir.path(), &dataset, &backend, Options::default()).await;
    assert_eq!(outcome.coverage.infra_error, 1);
    let name = outcome.results[0].trial_name.clone();
    // Without --retry-failed the failed trial is complete and stays as it is.
    let plain = Options {
        resume: Some(Vec::new()),
        ..Options::default()
    };
    let (outcome, report) = run_at(dir.path(), &dataset, &backend, plain).await;
    assert_eq!(report.unwrap().complete, 1);
    assert_eq!(outcome.coverage.infra_error, 1);
    let again = Options {
        resume: Some(vec!["EnvironmentError".into()]),
        ..Options::default()
    };
    let (outcome, report) = run_at(dir.path(), &dataset, &backend, again).await;
    assert_eq!(
        report.unwrap().rerun[0].1,
        "--retry-failed EnvironmentStartError"
    );
    assert_eq!(outcome.coverage.scored, 1);
    let trial_dir = dir.path().join("jobs/job").join(&name);
    let old = json(&trial_dir.join("attempts/1/result.json"));
    assert_eq!(
        old["exception_info"]["exception_type"],
        "EnvironmentStartError"
    );
    assert_eq!(json(&trial_dir.join("result.json"))["attempts"], 2);
}

#[tokio::test]
async fn resume_with_a_changed_agent_or_fewer_trials_is_refused_naming_the_difference() {
    let (dir, dataset) = fixture(0.0, REWARD_IF_DONE, "");
    let backend = FakeBackend::new();
    let first = Options {
        k: 2,
        ..Options::default()
    };
    run_at(dir.path(), &dataset, &backend, first).await;
    let job_dir = dir.path().join("jobs/job");
    let nop = Options {
        agent: AnyAgent::builtin("nop").unwrap(),
        k: 2,
        ..Options::default()
    };
    let mut plan = plan_job(&dataset, &settings(dir.path(), &nop));
    let err = resume(&job_dir, &mut plan, &[]).unwrap_err().to_string();
    assert!(
        err.contains("agents[0].name: \"oracle\" in the job, \"nop\" now"),
        "{err}"
    );
    let fewer = Options {
        k: 1,
        ..Options::default()
    };
    let mut plan = plan_job(&dataset, &settings(dir.path(), &fewer));
    let err = resume(&job_dir, &mut plan, &[]).unwrap_err().to_string();
    assert!(err.contains("k=2") && err.contains("--k 1"), "{err}");
    let stretched = Options {
        k: 2,
        multipliers: Multipliers {
            timeout_multiplier: 2.0,
            ..Multipliers::default()
        },
        ..Options::default()
    };
    let mut plan = plan_job(&dataset, &settings(dir.path(), &stretched));
    let err = resume(&job_dir, &mut plan, &[]).unwrap_err().to_string();
    assert!(
        err.contains("multipliers.timeout_multiplier: 1.0 in the job, 2.0 now"),
        "{err}"
    );
}
