//! One trial as a value: [`Trial`] holds the trial's record, log, deadlines and environment,
//! and has one method per phase, each returning `Result<_, TrialFailure>`. [`run_trial`]
//! drives the phases, handles cancellation, panics and the watchdog once around all of them,
//! tears the environment down on every path and returns the record; [`write_result`] makes it
//! durable (the job layer decides where: the trial dir, or `attempts/<n>/` before a retry).

mod agent;
pub mod artifacts;
mod attribution;
mod bridge;
mod collection;
pub mod egress;
mod environment;
mod healthcheck;
pub mod image;
mod log;
mod naming;
mod phase_network;
mod record;
mod relay;
mod separate_verifier;
mod steps;
mod storage;
mod verification;
pub mod watchdog;

pub use bridge::JobBridge;
pub use collection::PhasedCollection;
pub use environment::first_tests;
pub use image::ImageCache;
pub use log::TrialLog;
pub use naming::trial_name;
// The seams `runner serve` verifies and prepares steps through, as a trial does.
pub use phase_network::NetworkPlan;
pub use separate_verifier::{
    SeparateVerifierSetup, is_separate, separate_verifier_setup, trial_verifier_mode,
};
pub use steps::{open_step_record, prepare_step};

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapter::AnyAgent;
use chrono::Utc;
use futures_util::FutureExt;
use tasks::records::{TrialConfig, TrialIdentity, TrialLimits, TrialResult};
use tasks::{Multipliers, Task};
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, Environment, ExecObserver, OutputSink};
use crate::events::{Event, EventSender, Phase};
use crate::failure::TrialFailure;
use crate::job::{PauseMonitor, lock_entry};
use crate::limits::LimitSettings;
use crate::timeouts::PhaseTimeouts;
use watchdog::PhaseClock;

/// The longest teardown may take; past it the job's sweep (by label) removes what is left.
const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(120);

/// What every trial of a job shares.
pub struct JobContext<B: Backend> {
    /// Runs the environments.
    pub backend: B,
    /// The agent under test.
    pub agent: AnyAgent,
    /// The job's id (labels every environment).
    pub job_id: String,
    /// The job directory; each trial writes `<job_dir>/<trial_name>/`.
    pub job_dir: PathBuf,
    /// Timeout multipliers.
    pub multipliers: Multipliers,
    /// Rebuild images even when one of the same content exists.
    pub force_build: bool,
    /// Limits every trial runs under.
    pub limits: LimitSettings,
    /// Images per task, prepared once by the first trial that needs one.
    pub images: ImageCache,
    /// Progress, for the recorder and the reporter.
    pub events: EventSender,
    /// Cancelled on Ctrl-C, SIGTERM or SIGHUP.
    pub cancel: CancellationToken,
    /// Pauses of the runner seen so far.
    pub pauses: PauseMonitor,
    /// How long past its deadline a phase may run before the watchdog ends the trial.
    pub watchdog_grace: Duration,
    /// The LLM bridge the agent's models are called through, when the job has one.
    pub bridge: Option<JobBridge>,
}

impl<B: Backend> JobContext<B> {
    pub(crate) fn emit(&self, event: Event) {
        // The receiver only goes away when the job is over; nothing is lost that matters then.
        let _ = self.events.send(event);
    }
}

/// One planned trial.
#[derive(Debug, Clone)]
pub struct TrialPlan {
    /// The task.
    pub task: Arc<Task>,
    /// The trial's config (written as config.json).
    pub config: TrialConfig,
    /// The task's `[environment].env`, resolved.
    pub env: BTreeMap<String, String>,
    /// The trial's identity (also in `config.identity`).
    pub identity: TrialIdentity,
    /// The number of this run's first attempt: 1, or one more than the attempts a resume
    /// found kept under `attempts/`.
    pub first_attempt: u32,
}

impl TrialPlan {
    /// The trial's name (its directory's name).
    pub fn name(&self) -> &str {
        &self.config.trial_name
    }
}

/// A finished attempt and how long the runner itself spent on it.
#[derive(Debug)]
pub struct FinishedTrial {
    /// The record (not yet written; see [`write_result`]).
    pub result: TrialResult,
    /// Wall time of the trial, excluding the wait for the shared image.
    pub wall: Duration,
    /// Time spent inside environment commands.
    pub in_container: Duration,
}

/// Runs attempt `attempt` of one trial to the end. Every failure, cancellation, panic and
/// watchdog expiry inside the phases ends up in `exception_info`; the environment is removed
/// on every path. The record is returned, not written: see [`write_result`].
pub async fn run_trial<B: Backend>(
    ctx: Arc<JobContext<B>>,
    plan: TrialPlan,
    attempt: u32,
) -> FinishedTrial {
    let started = Instant::now();
    let mut trial = Trial::open(ctx.clone(), plan, attempt);
    let clock = trial.clock.clone();
    let ended = {
        let phases = AssertUnwindSafe(trial.phases()).catch_unwind();
        tokio::select! {
            // An interrupt wins over whatever finished at the same moment.
            biased;
            _ = ctx.cancel.cancelled() => Err(TrialFailure::cancelled()),
            hung = clock.expired(ctx.watchdog_grace) => Err(hung),
            ended = phases => ended.unwrap_or_else(|panic| Err(TrialFailure::panicked(panic))),
        }
    };
    if let Err(failure) = ended {
        trial.fail(failure);
    }
    trial.attribute().await;
    trial.unscore_unverified_step_failure();
    trial.close_bridge().await;
    trial.close_egress().await;
    trial.teardown().await;
    trial.finish(started)
}

/// Writes `result` as `<dir>/result.json`, durably (file and directory fsynced) before the
/// caller reports the trial complete, with the fields Harbor 0.26 computes filled in.
pub fn write_result(dir: &Path, result: &TrialResult) -> std::io::Result<()> {
    let mut result = result.clone();
    result.complete_harbor_fields();
    tasks::atomic::write_json_atomic(&dir.join("result.json"), &result)
}

/// A trial in progress.
pub struct Trial<B: Backend> {
    ctx: Arc<JobContext<B>>,
    plan: TrialPlan,
    dir: PathBuf,
    log: TrialLog,
    timeouts: PhaseTimeouts,
    result: TrialResult,
    environment: Option<B::Environment>,
    observer: ExecObserver,
    image_wait: Duration,
    clock: Arc<PhaseClock>,
    limits: TrialLimits,
    bridge: Option<Box<dyn crate::model_bridge::BridgedTrial>>,
    /// The pid of the LLM bridge's relay in the container, while it runs.
    bridge_relay_pid: Option<u32>,
    /// The egress proxy of a task with a network allowlist.
    egress: Option<egress::TrialEgress>,
    /// The artifacts manifest of a single-step trial collected with
    /// [`artifacts::Convention::Deferred`], whose convention entry is settled once
    /// `/logs/artifacts` is downloaded at the end (empty otherwise).
    manifest: Vec<artifacts::ManifestEntry>,
    /// True when the verification brought `/logs/artifacts` back after the tests (the end of
    /// trial download is then done).
    artifacts_collected: bool,
    /// True once the agent's setup began: from then on the container's state is the agent's
    /// to break (see [`attribution`]).
    agent_had_container: bool,
}

impl<B: Backend> Trial<B> {
    /// Creates the trial directory (durably: the job dir's entry is fsynced), writes
    /// `config.json` with the trial's limits and starts `trial.log`.
    fn open(ctx: Arc<JobContext<B>>, mut plan: TrialPlan, attempt: u32) -> Self {
        let name = plan.config.trial_name.clone();
        let dir = ctx.job_dir.join(&name);
        let limits = ctx.limits.resolve(&plan.task.config);
        plan.config.limits = Some(limits.clone());
        let config_written =
            tasks::atomic::write_json_atomic(&dir.join("config.json"), &plan.config);
        // The trial's own lock.json, as Harbor 0.26 writes one beside its config.
        let lock_written = tasks::records::harbor_lock_json(&lock_entry(&plan.task, &plan.config))
            .map_err(std::io::Error::other)
            .and_then(|lock| tasks::atomic::write_json_atomic(&dir.join("lock.json"), &lock));
        for sub in ["agent", "verifier", "artifacts"] {
            let _ = std::fs::create_dir_all(dir.join(sub));
        }
        let _ = tasks::atomic::sync_dir(&ctx.job_dir);
        let log = TrialLog::open(&dir.join("trial.log"), limits.trial_log_cap_bytes);
        if let Err(e) = config_written {
            log.line(&format!("cannot write config.json: {e}"));
        }
        if let Err(e) = lock_written {
            log.line(&format!("cannot write lock.json: {e}"));
        }
        ctx.emit(Event::TrialStarted {
            trial: name.clone(),
            attempt,
        });
        let mut result = record::new_result(&ctx.agent, &plan, &dir);
        result.attempts = Some(attempt);
        let timeouts = PhaseTimeouts::resolve(&plan.task.config, &ctx.multipliers);
        log.line(&format!(
            "trial {name} of task {} ({}), attempt {attempt}, identity {}",
            plan.task.name, plan.task.digest, plan.identity.key
        ));
        log.line(&format!("timeouts: {timeouts}"));
        log.line(&format!(
            "limits: pids {}, memory {} MB (swap included), storage {}, downloads {} MB and {} entries, trial.log {} MB",
            limits.pids_limit,
            limits.memory_mb,
            limits
                .storage_mb
                .map_or("unlimited".to_owned(), |mb| format!("{mb} MB")),
            limits.download_cap_bytes >> 20,
            limits.download_cap_entries,
            limits.trial_log_cap_bytes >> 20
        ));
        let sink_log = log.clone();
        let output: OutputSink = Arc::new(move |stream, bytes| sink_log.output(stream, bytes));
        Self {
            ctx,
            plan,
            dir,
            log,
            timeouts,
            result,
            environment: None,
            observer: ExecObserver::new(output),
            image_wait: Duration::ZERO,
            clock: Arc::new(PhaseClock::new()),
            limits,
            bridge: None,
            bridge_relay_pid: None,
            egress: None,
            manifest: Vec::new(),
            artifacts_collected: false,
            agent_had_container: false,
        }
    }

    /// The phases in order; a non-fatal agent failure is recorded and verification still runs.
    /// A multi-step task runs its steps (see [`steps`]) where a single-step task runs the agent,
    /// collects its artifacts and verifies.
    async fn phases(&mut self) -> Result<(), TrialFailure> {
        self.environment().await?;
        self.start_bridge_relay().await?;
        self.egress_phase(egress::EgressPhase::Setup).await?;
        let watch = self.storage_watch();
        self.agent_had_container = true;
        watch.guard(self.agent_setup()).await?;
        if self.plan.task.is_multi_step() {
            // The agent runs once per step, so the bridge stays open until the last step ends.
            watch.guard(self.steps()).await?;
            self.close_bridge().await;
        } else {
            let (command_ended, ended) = tokio::sync::oneshot::channel();
            watch
                .guard_to_the_end(self.agent_run(command_ended), ended)
                .await?;
            self.close_bridge().await;
            self.collect_artifacts().await?;
            watch.guard(self.verification()).await?;
        }
        self.collection().await;
        Ok(())
    }

    /// A watch of `storage_mb` when the environment does not enforce it itself.
    fn storage_watch(&self) -> storage::StorageWatch<<B::Environment as Environment>::Sandbox> {
        use tasks::records::StorageEnforcement;
        let watched = self.limits.storage_enforcement == StorageEnforcement::Watched;
        storage::StorageWatch::new(
            self.sandbox().ok().filter(|_| watched),
            self.limits.storage_mb,
            self.ctx.limits.storage_check_interval,
            self.log.clone(),
        )
    }

    /// Records how the started environment enforces `storage_mb`, in config.json and the result.
    fn record_storage_enforcement(&mut self, enforcement: tasks::records::StorageEnforcement) {
        if self.limits.storage_mb.is_none() || self.limits.storage_enforcement == enforcement {
            return;
        }
        self.limits.storage_enforcement = enforcement;
        self.plan.config.limits = Some(self.limits.clone());
        self.result.config.limits = Some(self.limits.clone());
        write_config(&self.dir, &self.plan.config, &self.log);
    }

    fn name(&self) -> &str {
        &self.plan.config.trial_name
    }

    /// Enters `phase`: ends the previous one in `trial.log`, starts the watchdog's allowance
    /// for this one and tells the reporter.
    fn enter(&self, phase: Phase) {
        let ended = self.clock.enter(phase, self.phase_limit(phase));
        self.log_phase_end(ended);
        self.log.line(&format!("phase: {} started", phase.label()));
        self.ctx.emit(Event::Phase {
            trial: self.name().to_owned(),
            phase,
        });
    }

    fn log_phase_end(&self, ended: Option<(Phase, Duration)>) {
        if let Some((phase, took)) = ended {
            self.log.line(&format!(
                "phase: {} finished in {:.3}s",
                phase.label(),
                took.as_secs_f64()
            ));
        }
    }

    /// How long `phase` may take before the watchdog's grace starts: the phase's own
    /// deadline (the agent's with the backstop the agent phase adds to it).
    fn phase_limit(&self, phase: Phase) -> Option<Duration> {
        let t = &self.timeouts;
        match phase {
            Phase::Image | Phase::Environment => Some(t.environment_build),
            Phase::AgentSetup => Some(t.agent_setup),
            Phase::Agent => t.agent.map(|a| a.saturating_add(agent::RUN_BACKSTOP)),
            Phase::Verifier => Some(t.verifier),
            // Teardown bounds its one call itself.
            Phase::Teardown => None,
        }
    }

    /// The main service's sandbox; only called after the environment phase succeeded.
    fn sandbox(&self) -> Result<<B::Environment as Environment>::Sandbox, TrialFailure> {
        self.environment
            .as_ref()
            .map(|env| env.main().clone())
            .ok_or_else(|| {
                TrialFailure::new(
                    tasks::ExceptionType::RunnerError,
                    "no environment is running for this phase",
                )
            })
    }

    /// Records `failure` as the trial's exception. Harbor keeps the first exception only;
    /// an interruption replaces it, because the trial's outcome is then unknown.
    fn fail(&mut self, failure: TrialFailure) {
        self.log
            .line(&format!("{}: {}", failure.kind, failure.message));
        record::record_failure(&mut self.result, &self.dir, failure);
    }

    /// When the trial ended with an infrastructure error of the runner's plumbing after the
    /// agent had the container, asks the environment whether the state left inside caused it,
    /// and if so records the agent's failure instead (see [`attribution`]). Skipped when the
    /// run is interrupted; bounded by [`attribution::DIAGNOSIS_TIMEOUT`].
    async fn attribute(&mut self) {
        let questioned = self
            .result
            .exception_info
            .as_ref()
            .is_some_and(|info| attribution::may_be_the_agents(&info.exception_type));
        let Some(environment) = self.environment.as_ref().filter(|_| questioned) else {
            return;
        };
        if !self.agent_had_container {
            return;
        }
        let diagnosis = tokio::select! {
            biased;
            _ = self.ctx.cancel.cancelled() => None,
            found = tokio::time::timeout(
                attribution::DIAGNOSIS_TIMEOUT,
                attribution::diagnose(environment, self.limits.storage_mb),
            ) => found.ok().flatten(),
        };
        if let Some((kind, why)) = diagnosis {
            self.log.line(&format!(
                "the failure was the agent's: {kind}: {why}; never retried"
            ));
            attribution::replace_exception(&mut self.result, &self.dir, kind, &why);
        }
    }

    /// Removes the environment, whatever state the trial ended in. The removal is bounded by
    /// the watchdog's grace: a removal that hangs is left to the job's sweep and the reaper.
    async fn teardown(&mut self) {
        self.enter(Phase::Teardown);
        if let Some(environment) = self.environment.take() {
            let what = environment.describe();
            match tokio::time::timeout(TEARDOWN_TIMEOUT, environment.remove()).await {
                Ok(Ok(())) => self.log.line(&format!("removal of {what} requested")),
                Ok(Err(e)) => self.log.line(&format!(
                    "removing {what} failed: {e}; the job's sweep or the next run reaps it"
                )),
                Err(_) => {
                    let text = format!(
                        "removing {what} took longer than {} s; the job's sweep or the next run reaps it",
                        TEARDOWN_TIMEOUT.as_secs()
                    );
                    self.warn(&text);
                }
            }
        }
        self.log_phase_end(self.clock.leave());
    }

    /// A `warning:` line in `trial.log` and the same words as a warning for the reporter.
    pub(super) fn warn(&self, text: &str) {
        self.log.line(&format!("warning: {text}"));
        self.ctx
            .emit(Event::Warning(format!("{}: {text}", self.name())));
    }

    /// Closes open phase timings, applies what pauses of the runner mean for the record,
    /// records the outcome and reports the trial's overhead.
    fn finish(mut self, started: Instant) -> FinishedTrial {
        record::close_open_timings(&mut self.result);
        record::backfill_model_usage(&mut self.result, &self.dir);
        self.result.truncated_outputs = self.observer.truncations();
        if self.log.is_truncated() {
            self.result
                .truncated_outputs
                .push(tasks::records::TruncatedOutput {
                    path: "trial.log".into(),
                    cap_bytes: self.log.cap(),
                    cap_entries: None,
                });
        }
        self.result.finished_at = Some(Utc::now());
        if let Some(pause) = self.ctx.pauses.observe() {
            self.ctx.emit(Event::Paused {
                seconds: pause.seconds,
            });
        }
        self.result.pauses = self.ctx.pauses.since(started);
        if record::reclassify_for_pauses(&mut self.result, &self.dir) {
            self.log.line(
                "the runner was paused while this trial ran and a deadline expired meanwhile: recorded as RunnerPausedError",
            );
        }
        let outcome = self.result.outcome();
        self.result.outcome = Some(outcome);
        let wall = started.elapsed().saturating_sub(self.image_wait);
        let in_container = self.observer.exec_time();
        self.log.line(&format!(
            "overhead: wall {:.3}s, in-container {:.3}s, runner {:.3}s",
            wall.as_secs_f64(),
            in_container.as_secs_f64(),
            wall.saturating_sub(in_container).as_secs_f64()
        ));
        self.log.line(&format!(
            "outcome: {}",
            record::describe_outcome(&self.result)
        ));
        FinishedTrial {
            result: self.result,
            wall,
            in_container,
        }
    }
}

/// Writes `config.json`; a failure is logged (the result still carries the config).
fn write_config(dir: &std::path::Path, config: &TrialConfig, log: &TrialLog) {
    if let Err(e) = tasks::atomic::write_json_atomic(&dir.join("config.json"), config) {
        log.line(&format!("cannot write config.json: {e}"));
    }
}
