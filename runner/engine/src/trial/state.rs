//! The trial in progress: [`Trial`], opened (its directory, `config.json`, `lock.json` and
//! `trial.log`) and finished (its record closed) here, with the helpers every phase uses
//! (entering a phase, the sandbox, recording a failure, a warning). The phases themselves
//! are in one file each; `mod.rs` runs them in order.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tasks::records::{TrialConfig, TrialLimits, TrialResult};

use super::artifacts::TrialArtifacts;
use super::bridge::TrialBridge;
use super::egress::TrialEgress;
use super::log::TrialLog;
use super::watchdog::PhaseClock;
use super::{FinishedTrial, TrialPlan, agent, record};
use crate::backend::{Backend, Environment, ExecObserver, OutputSink};
use crate::context::JobContext;
use crate::events::{Event, Phase};
use crate::failure::TrialFailure;
use crate::timeouts::PhaseTimeouts;

/// A trial in progress.
///
/// What every phase reads (the job's context, the plan, the directory, the log, the deadlines,
/// the record, the environment) is held here; each feature's own state is a struct of its
/// own, kept and changed by that feature's file: the LLM bridge's (`TrialBridge`), the
/// egress proxy's (`TrialEgress`), the artifacts' (`TrialArtifacts`). The storage watch
/// (`storage.rs`) lives for the phases it guards, so the sequence in `mod.rs` holds it.
pub struct Trial<B: Backend> {
    pub(super) ctx: Arc<JobContext<B>>,
    pub(super) plan: TrialPlan,
    pub(super) dir: PathBuf,
    pub(super) log: TrialLog,
    /// The deadlines the phases and the watchdog read: the trial's, or the running step's.
    pub(super) timeouts: PhaseTimeouts,
    pub(super) result: TrialResult,
    pub(super) environment: Option<B::Environment>,
    pub(super) observer: ExecObserver,
    /// The time spent waiting for the shared image, left out of the trial's overhead.
    pub(super) image_wait: Duration,
    pub(super) clock: Arc<PhaseClock>,
    pub(super) limits: TrialLimits,
    /// The trial's share of the job's LLM bridge (`bridge.rs`).
    pub(super) bridge: TrialBridge,
    /// The egress proxy of a task with a network allowlist (`egress.rs`).
    pub(super) egress: Option<TrialEgress>,
    /// What the artifacts' collection leaves for the end of the trial (`artifacts.rs`).
    pub(super) artifacts: TrialArtifacts,
    /// True once the agent's setup began: from then on the container's state is the agent's
    /// to break (`attribution.rs`).
    pub(super) agent_had_container: bool,
}

impl<B: Backend> Trial<B> {
    /// Creates the trial directory (durably: the job dir's entry is fsynced), writes
    /// `config.json` with the trial's limits and starts `trial.log`.
    pub(super) fn open(ctx: Arc<JobContext<B>>, mut plan: TrialPlan, attempt: u32) -> Self {
        let name = plan.config.trial_name.clone();
        let dir = ctx.job_dir.join(&name);
        let limits = ctx.limits.resolve(&plan.task.config);
        plan.config.limits = Some(limits.clone());
        let config_written =
            tasks::atomic::write_json_atomic(&dir.join("config.json"), &plan.config);
        // The trial's own lock.json, as Harbor 0.26 writes one beside its config.
        let lock_written =
            tasks::records::harbor_lock_json(&record::lock_entry(&plan.task, &plan.config))
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
            bridge: TrialBridge::default(),
            egress: None,
            artifacts: TrialArtifacts::default(),
            agent_had_container: false,
        }
    }

    /// Records how the started environment enforces `storage_mb`, in config.json and the result.
    pub(super) fn record_storage_enforcement(
        &mut self,
        enforcement: tasks::records::StorageEnforcement,
    ) {
        if self.limits.storage_mb.is_none() || self.limits.storage_enforcement == enforcement {
            return;
        }
        self.limits.storage_enforcement = enforcement;
        self.plan.config.limits = Some(self.limits.clone());
        self.result.config.limits = Some(self.limits.clone());
        write_config(&self.dir, &self.plan.config, &self.log);
    }

    pub(super) fn name(&self) -> &str {
        &self.plan.config.trial_name
    }

    /// Enters `phase`: ends the previous one in `trial.log`, starts the watchdog's allowance
    /// for this one and tells the reporter.
    pub(super) fn enter(&self, phase: Phase) {
        let ended = self.clock.enter(phase, self.phase_limit(phase));
        self.log_phase_end(ended);
        self.log.line(&format!("phase: {} started", phase.label()));
        self.ctx.emit(Event::Phase {
            trial: self.name().to_owned(),
            phase,
        });
    }

    pub(super) fn log_phase_end(&self, ended: Option<(Phase, Duration)>) {
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
    pub(super) fn phase_limit(&self, phase: Phase) -> Option<Duration> {
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
    pub(super) fn sandbox(&self) -> Result<<B::Environment as Environment>::Sandbox, TrialFailure> {
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
    pub(super) fn fail(&mut self, failure: TrialFailure) {
        self.log
            .line(&format!("{}: {}", failure.kind, failure.message));
        record::record_failure(&mut self.result, &self.dir, failure);
    }

    /// A `warning:` line in `trial.log` and the same words as a warning for the reporter.
    pub(super) fn warn(&self, text: &str) {
        self.log.line(&format!("warning: {text}"));
        self.ctx
            .emit(Event::Warning(format!("{}: {text}", self.name())));
    }

    /// Closes open phase timings, applies what pauses of the runner mean for the record,
    /// records the outcome and reports the trial's overhead.
    pub(super) fn finish(mut self, started: Instant) -> FinishedTrial {
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
        // The record is written and hashed next: nothing may change trial.log after it.
        self.log.close();
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
