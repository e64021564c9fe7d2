//! Multi-step tasks (`[[steps]]`), as Harbor 0.13.1's `MultiStepTrial` runs them: after one
//! environment start and one agent setup, each step in order gets its `workdir/` files and
//! `setup.sh` (and healthcheck), a new agent run on its instruction, its artifacts collected
//! and its own tests verified; a step that failed without rewards, or whose rewards miss its
//! `min_reward`, ends the trial and later steps do not run. The trial's `verifier_result` is
//! the steps' rewards aggregated (`multi_step_reward_strategy`: mean, or final).
//!
//! Each step's files go to `<trial>/steps/<name>/{agent,verifier,artifacts}/` and its record
//! to `result.json` → `step_results[]` (Harbor's `StepResult`). Records beyond Harbor's:
//! the trial's `agent_execution` and `verifier` span the steps' (first start, last end), and a
//! step failure that ends the trial (no rewards; an infrastructure failure) is also the
//! trial's `exception_info`, so outcomes, retries and the exit code see it. A failure Harbor
//! still verifies after (agent timeout, non-zero exit) stays in the step only, as in Harbor.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use chrono::Utc;
use tasks::config::StepConfig;
use tasks::records::{ExceptionInfo, PhaseTiming, StepResult};
use tasks::steps_rewards::{aggregate, stop_after_step};
use tasks::{ExceptionType, ExecRequest, Sandbox, Task, TimedPhase, shell_quote};

use super::Trial;
use super::agent::AgentTurn;
use super::artifacts::Convention;
use super::egress::EgressPhase;
use super::healthcheck;
use super::log::TrialLog;
use super::phase_network::NetworkPlan;
use crate::backend::{Backend, SandboxOf};
use crate::events::Phase;
use crate::failure::TrialFailure;
use crate::timeouts::PhaseTimeouts;

/// Empties what the previous step left in the container's log directories, as Harbor's
/// mounted log directories are emptied when a step's outputs move to `steps/<name>/`.
const RESET_LOGS: &str = "find /logs/agent /logs/artifacts -mindepth 1 -delete 2>/dev/null; \
    mkdir -p /logs/agent /logs/artifacts && chmod 777 /logs/agent /logs/artifacts";

/// `steps/<name>/instruction.md`: the instruction the step's agent run was given (runner-only).
const STEP_INSTRUCTION: &str = "instruction.md";

/// The deadlines of step `step`: its `[steps.agent] timeout_sec` or the task's, and its
/// `[steps.verifier] timeout_sec` (Harbor's default 600 s when it sets none, not the task's),
/// under the job's multipliers; the other phases' are the trial's.
pub fn step_timeouts(
    trial: &PhaseTimeouts,
    task: &Task,
    step: &StepConfig,
    multipliers: &tasks::Multipliers,
) -> PhaseTimeouts {
    PhaseTimeouts {
        agent: step
            .agent
            .timeout_sec
            .or(task.config.agent.timeout_sec)
            .map(|base| multipliers.scale(base, TimedPhase::Agent)),
        verifier: multipliers.scale(step.verifier.timeout_sec, TimedPhase::Verifier),
        ..*trial
    }
}

impl<B: Backend> Trial<B> {
    /// Runs the steps of a multi-step task in order, then aggregates their rewards.
    pub(super) async fn steps(&mut self) -> Result<(), TrialFailure> {
        let task = self.plan.task.clone();
        let trial_timeouts = self.timeouts;
        self.result.step_results = Some(Vec::new());
        let total = task.config.steps.len();
        let mut ended = Ok(());
        for (index, step) in task.config.steps.iter().enumerate() {
            self.log.line(&format!(
                "step {}/{total}: {} started",
                index + 1,
                step.name
            ));
            // The watchdog and the phases read the step's own deadlines.
            self.timeouts = step_timeouts(&trial_timeouts, &task, step, &self.ctx.multipliers);
            self.log.line(&format!("step timeouts: {}", self.timeouts));
            self.steps_mut().push(StepResult::new(&step.name));
            let ran = self.step(&task, index).await;
            let result = self
                .steps_mut()
                .last()
                .cloned()
                .unwrap_or_else(|| StepResult::new(""));
            if let Err(failure) = ran {
                ended = Err(failure);
                break;
            }
            if let Some(reason) = stop_after_step(step, &result) {
                self.log.line(&reason);
                if let Some(info) = result
                    .exception_info
                    .filter(|_| result.verifier_result.is_none())
                {
                    let failure = TrialFailure::new(info.exception_type, info.exception_message);
                    self.fail(failure);
                }
                break;
            }
        }
        self.timeouts = trial_timeouts;
        self.finish_steps(&task).await;
        ended
    }

    fn steps_mut(&mut self) -> &mut Vec<StepResult> {
        self.result.step_results.get_or_insert_with(Vec::new)
    }

    fn current_step(&mut self) -> &mut StepResult {
        let steps = self.steps_mut();
        if steps.is_empty() {
            steps.push(StepResult::new(""));
        }
        steps.last_mut().expect("a step was pushed")
    }

    /// One step: setup, agent, artifacts, verifier. Errors are failures that end the trial
    /// (also recorded in the step); everything else is recorded in the step's result.
    async fn step(&mut self, task: &Task, index: usize) -> Result<(), TrialFailure> {
        let step = &task.config.steps[index];
        let step_dir = self.dir.join("steps").join(&step.name);
        let setup_limit = self.timeouts.agent_setup;
        let log = self.log.clone();
        let mut side = TrialStep { trial: self, index };
        let subdirs = ["agent", "verifier", "artifacts"];
        let started = start_step(
            &mut side,
            task,
            index,
            &step_dir,
            &subdirs,
            setup_limit,
            &log,
        );
        let agent_user = match started.await {
            Ok(user) => user,
            Err(StepStartFailure::Setup(failure)) => {
                self.log.line(&format!(
                    "step {:?}: {}: {}",
                    step.name, failure.kind, failure.message
                ));
                let infrastructure = failure.kind.blame() == tasks::Blame::Infrastructure;
                record_step_failure(self.current_step(), &failure);
                // A broken sandbox ends the trial as it would a single-step one (and is
                // questioned as one: see `attribution`); a failed setup.sh or healthcheck ends
                // it through the gate (no rewards), as in Harbor, as the agent's
                // `StepSetupError`.
                return if infrastructure { Err(failure) } else { Ok(()) };
            }
            Err(StepStartFailure::Runner(failure)) => return Err(failure),
        };

        let network = NetworkPlan::of_step(&task.config, step);
        self.step_agent(task, index, &step_dir, &network, agent_user)
            .await?;

        let artifacts = step_dir.join("artifacts");
        self.collect_artifacts_into(
            &step.verifier.collect,
            &step.artifacts,
            &artifacts,
            Convention::Download,
        )
        .await?;

        self.step_verification(task, index, &step_dir).await
    }

    /// The step's agent run under the step's agent network (Harbor's `_phase_network_policy`:
    /// each phase under its own mode, the baseline restored after it; the switch, made as the
    /// step started, costs none of the phase's deadline). An agent failure after which the
    /// step is still verified is recorded in the step; one that ends the trial is returned.
    async fn step_agent(
        &mut self,
        task: &Task,
        index: usize,
        step_dir: &std::path::Path,
        network: &NetworkPlan,
        agent_user: Option<String>,
    ) -> Result<(), TrialFailure> {
        let step = &task.config.steps[index];
        // The container is on the step's agent network already ([`start_step`]).
        self.egress_step(Some(index));
        self.egress_phase(EgressPhase::Agent).await?;
        self.current_step().agent_execution = Some(PhaseTiming::start());
        let turn = AgentTurn {
            instruction: &task.steps[index].instruction,
            step: Some(step.name.clone()),
            timeout: self.timeouts.agent,
            user: agent_user,
            records_dir: step_dir.to_path_buf(),
            command_ended: None,
        };
        let ran = self.agent_turn(turn).await;
        finish(&mut self.current_step().agent_execution);
        self.switch_network(
            "rest of the step",
            network.agent_phase,
            network.agent_baseline,
        )
        .await?;
        self.egress_policy(EgressPhase::Setup)?;
        let ran = ran?;
        let context = ran.context.or_else(|| {
            ran.failure
                .as_ref()
                .and_then(|f| f.agent_context.as_deref().cloned())
        });
        self.current_step().agent_result = context;
        if let Some(failure) = ran.failure {
            record_step_failure(self.current_step(), &failure);
            if !failure.continues_to_verification(self.overrides()) {
                self.log_not_graded(&failure);
                return Err(failure);
            }
            self.log.line(&format!(
                "step {:?}: the agent failed ({}); the step is still verified",
                step.name, failure.kind
            ));
        }
        Ok(())
    }

    /// The step's verification, in the agent's container or a separate verifier's (the
    /// engine's one order: [`Trial::verify`]); its rewards or its failure recorded in the
    /// step. Only a failed network switch ends the trial (recorded in the step too).
    async fn step_verification(
        &mut self,
        task: &Task,
        index: usize,
        step_dir: &std::path::Path,
    ) -> Result<(), TrialFailure> {
        let step = &task.config.steps[index];
        self.stop_bridge_relay().await;
        self.enter(Phase::Verifier);
        self.current_step().verifier = Some(PhaseTiming::start());
        let verified = self.verify(Some(index), step_dir).await;
        finish(&mut self.current_step().verifier);
        match verified {
            Ok(Ok(result)) => {
                let reward = result.rewards.as_ref().map(|r| format!("{r:?}"));
                self.log.line(&format!(
                    "step {:?}: rewards {}",
                    step.name,
                    reward.unwrap_or_else(|| "none".into())
                ));
                self.current_step().verifier_result = Some(result);
            }
            Ok(Err(failure)) => {
                self.log.line(&format!(
                    "step {:?}: verification failed: {}: {}",
                    step.name, failure.kind, failure.message
                ));
                record_step_failure(self.current_step(), &failure);
            }
            Err(failure) => {
                record_step_failure(self.current_step(), &failure);
                return Err(failure);
            }
        }
        Ok(())
    }

    /// After the last step: the rewards aggregated, the trial's agent and verifier timings
    /// spanning the steps', and the container's log directories emptied so the trial-level
    /// collection that follows does not copy the last step's files twice.
    async fn finish_steps(&mut self, task: &Task) {
        let steps = self.result.step_results.clone().unwrap_or_default();
        self.result.verifier_result = aggregate(task.config.multi_step_reward_strategy, &steps);
        self.result.agent_execution = span(steps.iter().map(|s| &s.agent_execution));
        self.result.verifier = span(steps.iter().map(|s| &s.verifier));
        if let Some(rewards) = self
            .result
            .verifier_result
            .as_ref()
            .and_then(|v| v.rewards.as_ref())
        {
            self.log.line(&format!(
                "steps: {} ran, trial rewards {rewards:?}",
                steps.len()
            ));
        }
        self.join_step_trajectories(&steps);
        if let Ok(sandbox) = self.sandbox() {
            let _ = root(
                &sandbox,
                RESET_LOGS,
                "empty /logs/agent and /logs/artifacts",
            )
            .await;
        }
    }

    /// A multi-step trial that ended with the agent's failure in a step that was never
    /// verified (its setup sabotaged, its container stopped or its shell broken, its disk
    /// full) keeps no trial reward: it is an `agent_error`, a 0. Harbor's mean over the steps
    /// *with* a verifier result would otherwise score it on the steps before alone, so an
    /// agent expecting a 0 on a later step could raise its score by breaking that step's
    /// setup (two steps: 1.0 instead of 0.5). The steps' own rewards stay in `step_results`.
    pub(super) fn unscore_unverified_step_failure(&mut self) {
        let agents = self
            .result
            .exception_info
            .as_ref()
            .is_some_and(|info| info.exception_type.blame() == tasks::Blame::Agent);
        let unverified = self
            .result
            .step_results
            .as_ref()
            .and_then(|steps| steps.last())
            .is_some_and(|last| last.exception_info.is_some() && last.verifier_result.is_none());
        if agents && unverified && self.result.verifier_result.take().is_some() {
            self.log.line(
                "the trial ended with the agent's failure in a step that was not verified: no \
                 trial reward (agent_error, a 0), not the mean of the steps before it",
            );
        }
    }

    /// Writes `agent/trajectory.json` joining the steps' (see [`tasks::steps_trajectory`]).
    fn join_step_trajectories(&self, steps: &[StepResult]) {
        let names: Vec<String> = steps.iter().map(|s| s.step_name.clone()).collect();
        match tasks::steps_trajectory::join_files(&self.dir, &names) {
            Ok(joined) => {
                let path = self.dir.join("agent/trajectory.json");
                match tasks::atomic::write_json_atomic(&path, &joined) {
                    Ok(()) => self
                        .log
                        .line("agent/trajectory.json joins the steps' trajectories"),
                    Err(e) => self
                        .log
                        .line(&format!("cannot write {}: {e}", path.display())),
                }
            }
            Err(tasks::steps_trajectory::JoinError::Empty) => {}
            Err(e) => self
                .log
                .line(&format!("no joined agent/trajectory.json: {e}")),
        }
    }
}

/// What the one who runs a step does around [`start_step`]'s order: a trial, or an episode
/// of `runner serve`.
pub trait StepStart: Send {
    /// The container the step's setup runs in.
    type Sandbox: Sandbox;

    /// Before the step's setup: the container on the step's baseline network (`network`'s
    /// `agent_baseline`).
    fn to_setup_network(
        &mut self,
        network: &NetworkPlan,
    ) -> impl Future<Output = Result<(), TrialFailure>> + Send;

    /// The container, as the step's setup begins; its failure is the setup's.
    fn setup_sandbox(&mut self) -> Result<Self::Sandbox, TrialFailure>;

    /// After the step's setup: the container on the step's agent network (`network`'s
    /// `agent_phase`), ready for the step's agent.
    fn to_agent_network(
        &mut self,
        network: &NetworkPlan,
    ) -> impl Future<Output = Result<(), TrialFailure>> + Send;
}

/// Why a step could not start.
#[derive(Debug)]
pub enum StepStartFailure {
    /// Its setup ([`prepare_step`]) failed: the step's own failure.
    Setup(TrialFailure),
    /// What the runner does around the setup (a network switch) failed.
    Runner(TrialFailure),
}

/// A step's start, as a trial and an episode of `runner serve` start each step of a
/// multi-step task: the step's record opened in `step_dir` (with `subdirs`:
/// [`open_step_record`]), the container moved to the step's baseline network, the step's
/// setup ([`prepare_step`], each part within `setup_limit`), then the container moved to the
/// step's agent network. Returns the user the step's agent runs as.
pub async fn start_step<D: StepStart>(
    driver: &mut D,
    task: &Task,
    index: usize,
    step_dir: &Path,
    subdirs: &[&str],
    setup_limit: Duration,
    log: &TrialLog,
) -> Result<Option<String>, StepStartFailure> {
    let step = &task.config.steps[index];
    let user = open_step_record(task, index, step_dir, subdirs, log);
    let network = NetworkPlan::of_step(&task.config, step);
    driver
        .to_setup_network(&network)
        .await
        .map_err(StepStartFailure::Runner)?;
    let sandbox = driver.setup_sandbox().map_err(StepStartFailure::Setup)?;
    prepare_step(&sandbox, task, step, user.as_deref(), setup_limit, log)
        .await
        .map_err(StepStartFailure::Setup)?;
    driver
        .to_agent_network(&network)
        .await
        .map_err(StepStartFailure::Runner)?;
    Ok(user)
}

/// What a trial does around a step's start.
struct TrialStep<'t, B: Backend> {
    trial: &'t mut Trial<B>,
    index: usize,
}

impl<B: Backend> StepStart for TrialStep<'_, B> {
    type Sandbox = SandboxOf<B>;

    async fn to_setup_network(&mut self, _: &NetworkPlan) -> Result<(), TrialFailure> {
        // The container is on the step's baseline already: the phases before restored it.
        Ok(())
    }

    fn setup_sandbox(&mut self) -> Result<Self::Sandbox, TrialFailure> {
        self.trial.enter(Phase::AgentSetup);
        self.trial.sandbox()
    }

    async fn to_agent_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
        if self.index > 0 {
            // Stopped for the previous step's verification.
            self.trial.start_bridge_relay().await?;
        }
        self.trial
            .switch_network("agent run", network.agent_baseline, network.agent_phase)
            .await
    }
}

/// Opens step `index`'s record in `step_dir`: its `subdirs`, and the instruction its agent
/// gets, kept beside (not inside) the agent's downloaded logs so the agent cannot rewrite it
/// (`runner view` shows it per step; a write that fails is logged, not fatal). Returns the
/// user the step's agent runs as: the step's `[steps.agent] user`, else the task's.
fn open_step_record(
    task: &Task,
    index: usize,
    step_dir: &std::path::Path,
    subdirs: &[&str],
    log: &TrialLog,
) -> Option<String> {
    let step = &task.config.steps[index];
    for sub in subdirs {
        let _ = std::fs::create_dir_all(step_dir.join(sub));
    }
    if let Err(e) = tasks::atomic::write_atomic(
        &step_dir.join(STEP_INSTRUCTION),
        task.steps[index].instruction.as_bytes(),
    ) {
        log.line(&format!(
            "step {:?}: instruction not recorded: {e}",
            step.name
        ));
    }
    step.agent
        .user
        .as_ref()
        .or(task.config.agent.user.as_ref())
        .map(|u| u.as_exec_user())
}

/// Harbor's `_prepare_step` on `sandbox`, before a step's agent run: the container's log
/// directories emptied, the step's `workdir/` uploaded into the working directory, its
/// `setup.sh` run there (as the step's agent `user`), then the step's healthcheck, each
/// bounded by `limit`. A failed `setup.sh` or healthcheck is the agent's `StepSetupError`.
async fn prepare_step<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    step: &StepConfig,
    user: Option<&str>,
    limit: Duration,
    log: &TrialLog,
) -> Result<(), TrialFailure> {
    let work = async {
        root(sandbox, RESET_LOGS, "empty /logs/agent and /logs/artifacts").await?;
        let Some(workdir) = task.step_workdir(&step.name) else {
            return Ok(());
        };
        let pwd = sandbox
            .exec(ExecRequest::new("pwd").maybe_user(user).bookkeeping())
            .await?;
        let container_dir = pwd.stdout.trim().to_owned();
        let container_dir = if container_dir.is_empty() {
            "/".to_owned()
        } else {
            container_dir
        };
        sandbox.upload_dir(&workdir, &container_dir).await?;
        if workdir.join("setup.sh").is_file() {
            let script = format!("{}/setup.sh", container_dir.trim_end_matches('/'));
            let out = sandbox
                .exec(ExecRequest::new(format!("bash {}", shell_quote(&script))).maybe_user(user))
                .await?;
            if !out.success() {
                return Err(TrialFailure::new(
                    // Harbor raises a RuntimeError here; the container it ran in is the
                    // one the agent's install and earlier steps shaped, so it is the
                    // agent's failure, never a retried infrastructure error.
                    ExceptionType::StepSetupError,
                    format!(
                        "Step '{}' setup.sh exited with code {}: {}",
                        step.name,
                        out.exit_code.map_or("none".into(), |c| c.to_string()),
                        out.stderr.trim()
                    ),
                ));
            }
        }
        Ok(())
    };
    match tokio::time::timeout(limit, work).await {
        Ok(Ok(())) => {}
        Ok(Err(failure)) => return Err(failure),
        Err(_) => {
            return Err(TrialFailure::new(
                ExceptionType::StepSetupError,
                format!(
                    "Step '{}' setup took longer than {} seconds",
                    step.name,
                    limit.as_secs_f64()
                ),
            ));
        }
    }
    if let Some(check) = &step.healthcheck {
        // The services it checks run in the container the agent has had: a step's
        // healthcheck that fails is the agent's (the environment's own, before the agent,
        // stays a HealthcheckError).
        let bounded = tokio::time::timeout(limit, healthcheck::run(sandbox, check, log));
        match bounded.await {
            Ok(Ok(())) => {}
            Ok(Err(failure)) if failure.kind == ExceptionType::HealthcheckError => {
                return Err(TrialFailure::new(
                    ExceptionType::StepSetupError,
                    format!(
                        "step {:?}: the step's healthcheck failed: {}",
                        step.name, failure.message
                    ),
                ));
            }
            Ok(Err(failure)) => return Err(failure),
            Err(_) => {
                return Err(TrialFailure::new(
                    ExceptionType::StepSetupError,
                    format!("step {:?}: the healthcheck did not pass in time", step.name),
                ));
            }
        }
    }
    Ok(())
}

/// Records `failure` as the step's exception, keeping the first (a trial's step, or an
/// episode's).
pub fn record_step_failure(step: &mut StepResult, failure: &TrialFailure) {
    if step.exception_info.is_some() {
        return;
    }
    step.exception_info = Some(ExceptionInfo {
        exception_type: failure.kind.clone(),
        exception_message: failure.message.clone(),
        exception_traceback: format!("{}: {}\n", failure.kind, failure.message),
        occurred_at: Utc::now(),
        policy: None,
        policy_override: None,
    });
}

fn finish(timing: &mut Option<PhaseTiming>) {
    if let Some(timing) = timing {
        timing.finish();
    }
}

/// From the first start to the last end of `timings`; `None` when no step had one.
fn span<'a>(timings: impl Iterator<Item = &'a Option<PhaseTiming>>) -> Option<PhaseTiming> {
    let timings: Vec<&PhaseTiming> = timings.flatten().collect();
    let first = timings.first()?;
    Some(PhaseTiming {
        started_at: first.started_at,
        finished_at: timings.last().and_then(|t| t.finished_at),
    })
}

/// Runs `command` as root within a minute; a failure is the sandbox's.
async fn root<S: Sandbox>(sandbox: &S, command: &str, what: &str) -> Result<(), TrialFailure> {
    let out = sandbox
        .exec(ExecRequest::runner_own(command).timeout(Duration::from_secs(60)))
        .await?;
    if out.success() {
        Ok(())
    } else {
        Err(TrialFailure::new(
            ExceptionType::EnvironmentError,
            format!(
                "{what} failed (exit {:?}): {}",
                out.exit_code,
                out.stderr.trim()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_runs_from_the_first_start_to_the_last_end() {
        let at = |s: i64| Some(chrono::DateTime::from_timestamp(s, 0).unwrap());
        let timing = |a, b| {
            Some(PhaseTiming {
                started_at: at(a),
                finished_at: at(b),
            })
        };
        let all = [timing(1, 2), None, timing(5, 9)];
        let spanned = span(all.iter()).unwrap();
        assert_eq!((spanned.started_at, spanned.finished_at), (at(1), at(9)));
        assert_eq!(span([None, None].iter()), None);
    }

    /// Starts steps as a trial or an episode would, recording the order of its hooks.
    struct Recorder {
        sandbox: std::sync::Arc<testkit::FakeSandbox>,
        calls: Vec<String>,
        refuse_network: bool,
    }

    impl StepStart for Recorder {
        type Sandbox = std::sync::Arc<testkit::FakeSandbox>;

        async fn to_setup_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
            self.calls
                .push(format!("network {}", network.agent_baseline.as_str()));
            if self.refuse_network {
                return Err(TrialFailure::new(
                    ExceptionType::EnvironmentError,
                    "no switch",
                ));
            }
            Ok(())
        }

        fn setup_sandbox(&mut self) -> Result<Self::Sandbox, TrialFailure> {
            self.calls.push("setup".into());
            Ok(self.sandbox.clone())
        }

        async fn to_agent_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
            self.calls
                .push(format!("network {}", network.agent_phase.as_str()));
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_step_starts_in_one_order_and_a_failed_setup_is_the_steps_own() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| testkit::files::write(dir.path(), rel, text);
        write(
            "task.toml",
            "[environment]\nnetwork_mode = \"no-network\"\n\
             [[steps]]\nname = \"a\"\n[steps.agent]\nnetwork_mode = \"public\"\nuser = \"agent\"\n\
             [[steps]]\nname = \"b\"\n",
        );
        write("environment/Dockerfile", "FROM scratch\n");
        write("tests/test.sh", "exit 0\n");
        write("steps/a/instruction.md", "Do a.\n");
        write("steps/b/instruction.md", "Do b.\n");
        write("steps/b/workdir/setup.sh", "exit 3\n");
        let task = Task::load(dir.path()).unwrap();
        let records = tempfile::tempdir().unwrap();
        let log = TrialLog::open(&records.path().join("trial.log"), 1 << 20);
        let limit = Duration::from_secs(60);
        let mut recorder = Recorder {
            sandbox: std::sync::Arc::new(testkit::FakeSandbox::new()),
            calls: Vec::new(),
            refuse_network: false,
        };

        let step_a = records.path().join("steps/a");
        let started = start_step(&mut recorder, &task, 0, &step_a, &["verifier"], limit, &log);
        assert_eq!(started.await.unwrap().as_deref(), Some("agent"));
        assert_eq!(
            recorder.calls,
            ["network no-network", "setup", "network public"]
        );
        let instruction = std::fs::read_to_string(step_a.join(STEP_INSTRUCTION)).unwrap();
        assert!(instruction.contains("Do a."), "{instruction}");
        assert!(step_a.join("verifier").is_dir());

        recorder.calls.clear();
        let step_b = records.path().join("steps/b");
        let failed = start_step(&mut recorder, &task, 1, &step_b, &[], limit, &log).await;
        match failed {
            Err(StepStartFailure::Setup(failure)) => {
                assert_eq!(failure.kind, ExceptionType::StepSetupError, "{failure:?}");
            }
            other => panic!("not the step's setup failure: {other:?}"),
        }
        assert_eq!(
            recorder.calls,
            ["network no-network", "setup"],
            "no agent network after a failed setup"
        );

        recorder.calls.clear();
        recorder.refuse_network = true;
        let refused = start_step(&mut recorder, &task, 0, &step_a, &[], limit, &log).await;
        assert!(
            matches!(refused, Err(StepStartFailure::Runner(_))),
            "{refused:?}"
        );
        assert_eq!(
            recorder.calls,
            ["network no-network"],
            "no setup off its network"
        );
    }

    #[test]
    fn a_step_takes_its_own_deadlines_else_the_tasks_agent_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| testkit::files::write(dir.path(), rel, text);
        write(
            "task.toml",
            "[agent]\ntimeout_sec = 100.0\n[verifier]\ntimeout_sec = 30.0\n\
             [[steps]]\nname = \"a\"\n[steps.agent]\ntimeout_sec = 10.0\n\
             [[steps]]\nname = \"b\"\n[steps.verifier]\ntimeout_sec = 5.0\n",
        );
        write("environment/Dockerfile", "FROM scratch\n");
        for step in ["a", "b"] {
            write(&format!("steps/{step}/instruction.md"), "Do.\n");
        }
        write("tests/test.sh", "exit 0\n");
        let task = Task::load(dir.path()).unwrap();
        let multipliers = tasks::Multipliers {
            timeout_multiplier: 2.0,
            ..Default::default()
        };
        let trial = PhaseTimeouts::resolve(&task.config, &multipliers);
        let a = step_timeouts(&trial, &task, &task.config.steps[0], &multipliers);
        assert_eq!(a.agent, Some(Duration::from_secs(20)));
        assert_eq!(
            a.verifier,
            Duration::from_secs(1200),
            "Harbor's 600 s step default"
        );
        let b = step_timeouts(&trial, &task, &task.config.steps[1], &multipliers);
        assert_eq!(b.agent, Some(Duration::from_secs(200)));
        assert_eq!(b.verifier, Duration::from_secs(10));
        assert_eq!(b.environment_build, trial.environment_build);
    }
}
