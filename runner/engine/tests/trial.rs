//! The trial state machine on the fake backend: every phase's success and failure paths end in
//! the right `exception_info`, phase timings and environment removal. No Docker is involved
//! (run with `DOCKER_HOST=unix:///nonexistent` to see).

use std::path::{Path, PathBuf};
use std::time::Duration;

use adapter::{AnyAgent, InstalledAgent, InstalledAgentConfig};
use engine::BackendErrorKind;
use engine::events::{Event, Phase};
use engine::job::{JobOutcome, JobSettings, plan_job, run_job};
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
    tally: Tally,
    job_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn only(&self) -> &TrialResult {
        assert_eq!(self.outcome.results.len(), 1, "one trial");
        &self.outcome.results[0]
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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            agent: AnyAgent::builtin("oracle").unwrap(),
            k: 1,
            multipliers: Multipliers::default(),
            cancel_at: None,
        }
    }
}

async fn run(
    dir: tempfile::TempDir,
    dataset: Dataset,
    backend: FakeBackend,
    options: Options,
) -> Run {
    let job_dir = dir.path().join("jobs/job");
    let settings = JobSettings {
        job_name: "job".into(),
        jobs_dir: dir.path().join("jobs").display().to_string(),
        k: options.k,
        n_concurrent: 2,
        multipliers: options.multipliers,
        force_build: false,
        agent: adapter::Agent::job_config(&options.agent),
        allow_container_secrets: false,
        instruction_suffix: None,
        invocation: vec!["test".into()],
        runner_commit: None,
        limits: engine::LimitSettings::default(),
    };
    let plan = plan_job(&dataset, &settings);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let outcome = run_job(
        backend.clone(),
        options.agent,
        plan,
        job_dir.clone(),
        &settings,
        cancel,
        move |event| {
            if let Event::Phase { phase, .. } = event
                && Some(*phase) == options.cancel_at
            {
                trigger.cancel();
            }
        },
    )
    .await
    .expect("the job directory is written");
    Run {
        outcome,
        tally: backend.tally(),
        job_dir,
        _dir: dir,
    }
}

/// A fake backend whose script `edit` changed first.
fn scripted_backend(edit: impl FnOnce(&mut Script)) -> FakeBackend {
    let backend = FakeBackend::new();
    backend.script(edit);
    backend
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
    assert_eq!(run.outcome.results.len(), 2);
    for result in &run.outcome.results {
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
    let backend = scripted_backend(|s| {
        s.start_faults
            .push_back(fault(BackendErrorKind::Start, "no space left on device"))
    });
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
            agent_setup: Some(0.01),
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
