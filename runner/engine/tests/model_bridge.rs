//! The engine's side of the LLM bridge, driven through [`engine::ModelBridge`] with a fake
//! bridge on the fake backend: when a trial's grant is started, served, paused and closed; what
//! the close puts into the records; how a spent job budget stops the scheduler; and a refused
//! grant. The real bridge (runner/llm-bridge) is tested over HTTP in its own crate and against
//! Docker in tests/e2e/bridge*.rs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use adapter::AnyAgent;
use engine::job::{JobSettings, plan_job, run_job};
use engine::trial::JobBridge;
use engine::{BridgedTrial, ModelBridge, ModelBridgeError, TrialBudget};
use futures_util::future::BoxFuture;
use tasks::records::{JobLlmUsage, JobResult, TrialLlmUsage, TrialResult};
use tasks::{Dataset, ExceptionType};
use testkit::{FakeBackend, TaskFixture};
use tokio_util::sync::CancellationToken;

/// What every fake trial reports it spent when closed.
const INPUT_TOKENS: u64 = 120;
const OUTPUT_TOKENS: u64 = 30;

/// A bridge that serves nothing: it logs what the engine asks of it, in order.
#[derive(Debug, Default)]
struct FakeBridge {
    log: Arc<Mutex<Vec<String>>>,
    /// Refuse every trial with this message.
    refuse: Option<String>,
    /// The job's budget is spent once this many trials have closed.
    budget_trials: Option<usize>,
    socket_dir: PathBuf,
}

impl FakeBridge {
    fn say(&self, what: String) {
        self.log.lock().unwrap().push(what);
    }

    fn closed(&self) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("close"))
            .count()
    }

    /// The log without repeats of the same line in a row (`pause` is idempotent, and the
    /// engine may pause twice as an agent's turn ends).
    fn events(&self) -> Vec<String> {
        let mut log = self.log.lock().unwrap().clone();
        log.dedup();
        log
    }
}

#[derive(Debug)]
struct FakeTrial {
    name: String,
    log: Arc<Mutex<Vec<String>>>,
    socket_dir: PathBuf,
}

impl FakeTrial {
    fn say(&self, what: &str) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{what} {}", self.name));
    }
}

impl ModelBridge for FakeBridge {
    fn start_trial<'a>(
        &'a self,
        trial_name: &'a str,
        models: &'a [String],
        _trial_dir: &'a Path,
    ) -> BoxFuture<'a, Result<Box<dyn BridgedTrial>, ModelBridgeError>> {
        Box::pin(async move {
            if let Some(refusal) = &self.refuse {
                return Err(ModelBridgeError::new(std::io::Error::other(
                    refusal.clone(),
                )));
            }
            self.say(format!("start {trial_name} {}", models.join(",")));
            let trial = FakeTrial {
                name: trial_name.to_owned(),
                log: self.log.clone(),
                socket_dir: self.socket_dir.clone(),
            };
            Ok(Box::new(trial) as Box<dyn BridgedTrial>)
        })
    }

    fn trial_budget(&self) -> TrialBudget {
        TrialBudget::default()
    }

    fn budget_stop(&self) -> Option<String> {
        let limit = self.budget_trials?;
        (self.closed() >= limit).then(|| format!("the job's budget was spent by {limit} trial"))
    }

    fn job_usage(&self) -> JobLlmUsage {
        let trials = self.closed() as u64;
        JobLlmUsage {
            n_input_tokens: trials * INPUT_TOKENS,
            n_output_tokens: trials * OUTPUT_TOKENS,
            n_trials: trials,
            ..JobLlmUsage::default()
        }
    }
}

impl BridgedTrial for FakeTrial {
    fn token(&self) -> &str {
        "runner-fake-bridge-token"
    }

    fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    fn container_dir(&self) -> &str {
        "/run/fake-bridge"
    }

    fn socket_path(&self) -> &Path {
        &self.socket_dir
    }

    fn relay_port(&self) -> u16 {
        4999
    }

    fn agent_env(&self) -> Vec<(String, String)> {
        vec![("OPENAI_API_KEY".into(), self.token().into())]
    }

    fn relay_serve_command(&self) -> Vec<String> {
        vec!["sleep".into(), "300".into()]
    }

    fn relay_wait_command(&self, _timeout_ms: u64) -> Vec<String> {
        vec!["true".into()]
    }

    fn end_turn_command(&self) -> String {
        "true".into()
    }

    fn pause(&self) {
        self.say("pause");
    }

    fn resume(&self) {
        self.say("resume");
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, Result<TrialLlmUsage, ModelBridgeError>> {
        self.say("close");
        Box::pin(async move {
            Ok(TrialLlmUsage {
                n_input_tokens: INPUT_TOKENS,
                n_output_tokens: OUTPUT_TOKENS,
                n_calls: 3,
                models_called: ["openai/gpt-fake".to_owned()].into(),
                ..TrialLlmUsage::default()
            })
        })
    }
}

/// What a job run with a fake bridge left behind.
struct Ran {
    bridge: Arc<FakeBridge>,
    job: JobResult,
    trials: Vec<TrialResult>,
    environments_started: usize,
    trial_log: String,
    _dir: tempfile::TempDir,
}

/// Runs the oracle `k` times on a one-task dataset whose tests pass, with `bridge` serving
/// `openai/gpt-fake`.
async fn run_bridged(bridge: FakeBridge, k: u32) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    TaskFixture::new("test/bridged")
        .test_sh("echo 1 > /logs/verifier/reward.txt")
        .file("solution/solve.sh", "#!/bin/bash\ntrue\n")
        .write(&dir.path().join("dataset/bridged"));
    let dataset = Dataset::load(&dir.path().join("dataset")).unwrap();
    let bridge = Arc::new(FakeBridge {
        socket_dir: dir.path().join("socket"),
        ..bridge
    });
    std::fs::create_dir_all(&bridge.socket_dir).unwrap();
    let agent = AnyAgent::builtin("oracle").unwrap();
    let settings = JobSettings {
        bridge: Some(JobBridge {
            bridge: bridge.clone(),
            models: vec!["openai/gpt-fake".into()],
            allow_container_secrets: false,
        }),
        ..testkit::job_settings(dir.path(), "job", &agent, k)
    };
    let backend = FakeBackend::new();
    let job_dir = dir.path().join("jobs/job");
    let outcome = run_job(
        backend.clone(),
        agent,
        plan_job(&dataset, &settings),
        job_dir.clone(),
        &settings,
        CancellationToken::new(),
        |_| {},
    )
    .await
    .unwrap();
    let trials = testkit::records::on_disk(&job_dir, &outcome.results);
    let trial_log = trials
        .first()
        .map(|t| std::fs::read_to_string(job_dir.join(&t.trial_name).join("trial.log")))
        .transpose()
        .unwrap()
        .unwrap_or_default();
    let job = serde_json::from_str(&std::fs::read_to_string(job_dir.join("result.json")).unwrap())
        .unwrap();
    Ran {
        bridge,
        job,
        trials,
        environments_started: backend.tally().started.len(),
        trial_log,
        _dir: dir,
    }
}

#[tokio::test]
async fn a_trial_is_served_only_during_its_agent_turn_and_its_metered_usage_is_recorded() {
    let ran = run_bridged(FakeBridge::default(), 1).await;
    let [trial] = ran.trials.as_slice() else {
        panic!("one trial: {:?}", ran.trials.len());
    };
    assert_eq!(trial.reward(), Some(1.0), "{:?}", trial.exception_info);
    let name = &trial.trial_name;
    // Started paused before the container (so not during setup), served for the agent's turn
    // only, closed when the agent phase ends.
    assert_eq!(
        ran.bridge.events(),
        [
            format!("start {name} openai/gpt-fake"),
            format!("pause {name}"),
            format!("resume {name}"),
            format!("pause {name}"),
            format!("close {name}"),
        ]
    );
    let agent = trial.agent_result.as_ref().expect("agent_result");
    assert_eq!(
        (agent.n_input_tokens, agent.n_output_tokens),
        (Some(INPUT_TOKENS), Some(OUTPUT_TOKENS)),
        "the bridge's count replaces the agent's"
    );
    let metadata = agent.metadata.as_ref().expect("metadata");
    assert_eq!(metadata["llm_bridge"]["n_calls"], 3, "{metadata:?}");
    assert!(
        ran.trial_log
            .contains("LLM bridge: relay listening on 127.0.0.1:4999"),
        "{}",
        ran.trial_log
    );
    let job = ran.job.llm_bridge.expect("the job's llm_bridge totals");
    assert_eq!((job.n_trials, job.n_input_tokens), (1, INPUT_TOKENS));
    assert_eq!(job.n_trials_not_run_for_budget, 0);
}

#[tokio::test]
async fn a_spent_job_budget_starts_no_more_trials_and_counts_the_rest_as_not_run() {
    let bridge = FakeBridge {
        budget_trials: Some(1),
        ..FakeBridge::default()
    };
    let ran = run_bridged(bridge, 3).await;
    assert_eq!(
        ran.trials.len(),
        1,
        "one trial ran before the budget was spent"
    );
    assert_eq!(ran.environments_started, 1);
    let job = ran.job.llm_bridge.expect("the job's llm_bridge totals");
    assert_eq!(job.n_trials_not_run_for_budget, 2);
    assert!(
        job.budget_exhausted
            .as_deref()
            .is_some_and(|r| r.contains("budget was spent by 1 trial")),
        "{job:?}"
    );
}

#[tokio::test]
async fn a_refused_grant_fails_the_trial_as_a_bridge_error_before_any_container() {
    let bridge = FakeBridge {
        refuse: Some("no models for you".into()),
        ..FakeBridge::default()
    };
    let ran = run_bridged(bridge, 1).await;
    let [trial] = ran.trials.as_slice() else {
        panic!("one trial: {:?}", ran.trials.len());
    };
    let failure = trial.exception_info.as_ref().expect("a failure");
    assert_eq!(failure.exception_type, ExceptionType::LlmBridgeError);
    assert!(
        failure.exception_message.contains("no models for you"),
        "{failure:?}"
    );
    assert_eq!(ran.environments_started, 0, "no container was made");
    assert!(ran.bridge.events().is_empty(), "{:?}", ran.bridge.events());
}
