//! One trial as a value. This file is the trial's sequence, read top to bottom: [`run_trial`]
//! opens the [`Trial`] (`state.rs`), runs its phases (`Trial::phases`, below: environment,
//! agent setup, agent, collection, verification, or the steps of a multi-step task) under one
//! `select!` that handles cancellation, panics and the watchdog, then ends it on every path
//! (`Trial::end`: whose failure it was, the bridge and egress closed, teardown) and returns
//! the record; [`write_result`] makes it durable (the job layer decides where: the trial dir,
//! or `attempts/<n>/` before a retry). Each phase is a method in a file of its own, and each
//! feature keeps its state in a struct of its own that `Trial` holds (see `state.rs`).

mod agent;
pub(crate) mod artifacts;
mod attribution;
mod bridge;
pub(crate) mod collection;
pub(crate) mod egress;
pub(crate) mod environment;
pub(crate) mod healthcheck;
pub(crate) mod log;
mod naming;
pub(crate) mod phase_network;
mod record;
mod relay;
pub(crate) mod separate_verifier;
mod state;
pub(crate) mod steps;
mod storage;
pub(crate) mod verification;
pub(crate) mod verify_order;
pub mod watchdog;

// The job's bridge, where `runner run` and the engine's tests name it.
pub use crate::context::JobBridge;
pub use naming::trial_name;
pub use record::lock_entry;
pub use separate_verifier::trial_verifier_mode;
pub use state::Trial;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tasks::Task;
use tasks::records::{TrialConfig, TrialIdentity, TrialResult};

use crate::backend::Backend;
use crate::context::JobContext;
use crate::failure::TrialFailure;

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
    trial.end().await;
    trial.finish(started)
}

/// Writes `result` as `<dir>/result.json`, durably (file and directory fsynced) before the
/// caller reports the trial complete, with the fields Harbor 0.26 computes filled in.
pub fn write_result(dir: &Path, result: &TrialResult) -> std::io::Result<()> {
    let mut result = result.clone();
    result.complete_harbor_fields();
    tasks::atomic::write_json_atomic(&dir.join("result.json"), &result)
}

/// The phases, in the order they run.
impl<B: Backend> Trial<B> {
    /// The phases in order; a non-fatal agent failure is recorded and verification still runs.
    /// A multi-step task runs its steps where a single-step task runs the agent, collects its
    /// artifacts and verifies.
    async fn phases(&mut self) -> Result<(), TrialFailure> {
        // Environment (`environment.rs`): the shared image, the container, its healthcheck;
        // then the runner's relays in it (`bridge.rs`, `egress.rs`).
        self.environment().await?;
        self.start_bridge_relay().await?;
        self.egress_phase(egress::EgressPhase::Setup).await?;
        // From here on the container is the agent's, under the storage watch (`storage.rs`).
        let watch = self.storage_watch();
        self.agent_had_container = true;
        // Agent setup (`agent.rs`).
        watch.guard(self.agent_setup()).await?;
        if self.plan.task.is_multi_step() {
            // Steps (`steps.rs`): each its setup, agent run, artifacts and verification. The
            // agent runs once per step, so the bridge stays open until the last step ends.
            watch.guard(self.steps()).await?;
            self.close_bridge().await;
        } else {
            // Agent (`agent.rs`), measured once more by the watch as its command ends.
            let (command_ended, ended) = tokio::sync::oneshot::channel();
            watch
                .guard_to_the_end(self.agent_run(command_ended), ended)
                .await?;
            self.close_bridge().await;
            // Collection of the artifacts (`artifacts.rs`, `collection.rs`).
            self.collect_artifacts().await?;
            // Verification (`verification.rs`; its order `verify_order.rs`, `separate_verifier.rs`).
            watch.guard(self.verification()).await?;
        }
        // The end of trial collection: `/logs/artifacts` (`verification.rs`).
        self.collection().await;
        Ok(())
    }

    /// After the phases, on every path: whose failure it was (`attribution.rs`), a multi-step
    /// trial's reward unscored after an unverified agent failure (`steps.rs`), the bridge and
    /// the egress proxy closed, and teardown (`environment.rs`).
    async fn end(&mut self) {
        self.attribute().await;
        self.unscore_unverified_step_failure();
        self.close_bridge().await;
        self.close_egress().await;
        self.teardown().await;
    }
}
