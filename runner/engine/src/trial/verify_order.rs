//! The order of one verification, a trial's and a `runner serve` episode's alike: of the task
//! or of one of its steps, either in a verifier environment of its own ([`run_separately`]:
//! its container made from the agent environment's spec, the collected artifacts uploaded, its
//! image's own tests) or in the agent's container, moved to the verifier's network first
//! ([`run_tests`]: the tests in the verifier jail). What only one of them does around that
//! order (a trial's watchdog phases, egress relays and notes; an episode's network bookkeeping)
//! is its [`VerifyDriver`].

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use tasks::records::VerifierResult;
use tasks::{Sandbox, Task};
use verifiers::VerifyNotes;

use super::artifacts::normalized;
use super::log::TrialLog;
use super::phase_network::NetworkPlan;
use super::separate_verifier::{
    SeparatePlace, SeparateVerifierHooks, run_separately, separate_verifier_setup,
};
use crate::backend::{Backend, EnvironmentSpec, OutputSink, SandboxOf};
use crate::failure::TrialFailure;

/// Where one verification takes its inputs and puts its outputs.
pub struct VerifyPlace<'a> {
    /// The step verified (`None`: the task).
    pub step: Option<usize>,
    /// The trial's, the step's or the episode's directory: the outputs go to `verifier/`,
    /// and the artifacts were collected into its `artifacts/` (what a separate verifier
    /// receives).
    pub out_dir: &'a Path,
    /// The tests' time limit.
    pub timeout: Duration,
    /// A separate verifier's start's limit (a build, maybe): the task's build timeout.
    pub start_limit: Duration,
}

/// What a trial or an episode does around [`verify`]'s order. A separate verification calls
/// the [`SeparateVerifierHooks`] too; both kinds end in [`SeparateVerifierHooks::tests_ran`].
pub trait VerifyDriver<B: Backend>: SeparateVerifierHooks<SandboxOf<B>> {
    /// The agent environment's spec, from which a separate verifier's container is made
    /// (its `trial_name`, the trial's or the episode's, names the verifier's
    /// `<name>__verifier…`).
    fn agent_spec(&self) -> EnvironmentSpec;

    /// Where a separate verifier's image build output goes.
    fn build_output(&self) -> OutputSink;

    /// A separate verifier's container spec, before it starts (a trial adds its egress).
    fn separate_spec(&mut self, spec: &mut EnvironmentSpec) {
        let _ = spec;
    }

    /// Before tests in the agent's container: the container moved to `network`'s verifier
    /// phase. A failure ends the verification before it runs (and, in a trial, the trial).
    fn to_verifier_network(
        &mut self,
        network: &NetworkPlan,
    ) -> impl Future<Output = Result<(), TrialFailure>> + Send;

    /// After tests in the agent's container, whatever their outcome (a trial's step restores
    /// its baseline network). A failure, as [`Self::to_verifier_network`]'s, is the driver's.
    fn leave_verifier_network(
        &mut self,
        network: &NetworkPlan,
    ) -> impl Future<Output = Result<(), TrialFailure>> + Send {
        let _ = network;
        async { Ok(()) }
    }

    /// The agent's container, where shared tests run.
    fn agent_sandbox(&self) -> Result<SandboxOf<B>, TrialFailure>;

    /// The notes a shared verification starts with (the trial's `--agent-toolchain`, a
    /// download that rides along with the results).
    fn shared_notes(&self, step: Option<usize>) -> VerifyNotes {
        let _ = step;
        VerifyNotes::default()
    }
}

/// Verifies `task` (or `place.step`) where its config says, through `driver`, on `backend`.
/// The outer error is the driver's own (a network switch: no phase may run under the wrong
/// policy); the inner result is the verification's.
pub async fn verify<B: Backend, D: VerifyDriver<B>>(
    backend: &B,
    driver: &mut D,
    task: &Task,
    place: VerifyPlace<'_>,
    log: &TrialLog,
) -> Result<Result<VerifierResult, TrialFailure>, TrialFailure> {
    let step_config = place.step.map(|index| &task.config.steps[index]);
    let spec = driver.agent_spec();
    let session = spec.trial_name.clone();
    let setup = separate_verifier_setup(task, place.step, spec, &session);
    let setup = match setup {
        Ok(setup) => setup,
        Err(failure) => return Ok(Err(failure)),
    };
    if let Some(mut setup) = setup {
        driver.separate_spec(&mut setup.spec);
        let step_artifacts = step_config.map_or(&[][..], |step| &step.artifacts);
        let specs = normalized(&task.config.artifacts, step_artifacts);
        let artifacts_dir = place.out_dir.join("artifacts");
        let separate = SeparatePlace {
            step: place.step,
            out_dir: place.out_dir,
            artifacts_dir: &artifacts_dir,
            specs: &specs,
            timeout: place.timeout,
            start_limit: place.start_limit,
        };
        let output = driver.build_output();
        let ran = run_separately(backend, task, &setup, separate, log, &output, driver).await;
        return Ok(ran.map(|outcome| outcome.result));
    }
    let network = NetworkPlan::resolve(&task.config, step_config);
    driver.to_verifier_network(&network).await?;
    let verified = match driver.agent_sandbox() {
        Ok(sandbox) => {
            let mut notes = driver.shared_notes(place.step);
            let ran = run_tests(
                &sandbox,
                task,
                place.step,
                place.out_dir,
                place.timeout,
                &mut notes,
            )
            .await;
            driver.tests_ran(notes);
            ran.map(|outcome| outcome.result)
                .map_err(TrialFailure::from)
        }
        Err(failure) => Err(failure),
    };
    driver.leave_verifier_network(&network).await?;
    Ok(verified)
}

/// The tests of `task` (`step` `None`) or of its step `step`, in the agent's container
/// `sandbox` within `timeout`, their outputs into `out_dir`'s `verifier/` (a trial's or an
/// episode's directory, or a step's).
async fn run_tests<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    step: Option<usize>,
    out_dir: &Path,
    timeout: Duration,
    notes: &mut VerifyNotes,
) -> Result<verifiers::VerifierOutcome, verifiers::VerifierError> {
    let deadline = Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(Instant::now);
    match step {
        None => verifiers::verify(sandbox, task, out_dir, deadline, notes).await,
        Some(index) => verifiers::verify_step(sandbox, task, index, out_dir, deadline, notes).await,
    }
}
