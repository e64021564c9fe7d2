//! One verification of an episode, as a trial verifies: every process of the policy killed,
//! then the task's tests (a multi-step task's: the current step's). In the agent's container
//! they run in the verifier jail under the verifier's network. A verifier with an environment
//! of its own (`[verifier] environment_mode = "separate"`) gets a fresh container made as a
//! trial's is ([`engine::phases::separate_verifier_setup`]): it runs its image's own `/tests`,
//! receives only the declared artifacts collected from the episode's container (and
//! `/logs/artifacts`), and is removed after. Before the tests, the task's (and the step's)
//! `[[verifier.collect]]` hooks run and its artifacts, a sidecar's included, are collected
//! exactly as a trial's are ([`engine::phases::PhasedCollection`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::phases::{PhasedCollection, SeparateVerifierSetup};
use engine::trial::artifacts::{
    ArtifactSpec, CONVENTION_DIR, Collection, Convention, upload_artifacts,
};
use engine::{Backend, Environment, OutputSink, TrialFailure};
use tasks::records::VerifierResult;
use tasks::{ExceptionType, ExecRequest, Sandbox};
use verifiers::{VerifierError, VerifierOutcome, VerifyNotes};

use super::{Episode, access, network_plan};
use crate::scripts;

/// The longest removing a separate verifier's container may take (the server's sweep of
/// its job's containers at shutdown is the backstop).
const REMOVE_TIMEOUT: Duration = Duration::from_secs(120);

/// A verification that ran to a result.
pub(super) struct Graded {
    /// The verifier's result (rewards, exit code, named checks).
    pub(super) result: VerifierResult,
    /// How many processes of the policy were still running as the tests started.
    pub(super) leftovers: usize,
}

/// A verification that gave no result: why, and its exception type when it is known.
#[derive(Debug)]
pub(super) struct GradeFailure {
    pub(super) message: String,
    pub(super) kind: Option<ExceptionType>,
}

impl GradeFailure {
    fn new(message: impl Into<String>, kind: Option<ExceptionType>) -> Self {
        Self {
            message: message.into(),
            kind,
        }
    }
}

impl From<TrialFailure> for GradeFailure {
    fn from(failure: TrialFailure) -> Self {
        Self::new(failure.message, Some(failure.kind))
    }
}

impl From<VerifierError> for GradeFailure {
    fn from(e: VerifierError) -> Self {
        Self::new(e.to_string(), Some(e.exception_type()))
    }
}

/// Where one separate verification takes its inputs and puts its outputs.
struct SeparatePlace<'a> {
    /// The step verified (`None`: the task).
    step: Option<usize>,
    /// The episode's (or the step's) directory: the verifier's outputs go to `verifier/`.
    out_dir: &'a Path,
    /// Where the artifacts were collected on the host.
    artifacts_dir: &'a Path,
    /// The artifacts to upload.
    specs: &'a [ArtifactSpec],
    /// The tests' time limit.
    timeout: Duration,
}

impl<B: Backend> Episode<B> {
    /// The step being verified (`None` for a single-step task).
    pub(super) fn current_step(&self) -> Option<usize> {
        self.task.is_multi_step().then_some(self.step)
    }

    /// `separate` when the current verification runs in a verifier environment of its own,
    /// else `shared`.
    pub(super) fn verifier_mode(&self) -> &'static str {
        let step = self.current_step().map(|i| &self.task.config.steps[i]);
        if engine::phases::is_separate(&self.task, step) {
            "separate"
        } else {
            "shared"
        }
    }

    /// Where the current verification's outputs go: the episode's directory, or a step's
    /// `steps/<name>/` (as a trial's).
    pub(super) fn verification_dir(&self) -> PathBuf {
        match self.current_step() {
            Some(index) => self
                .dir
                .join("steps")
                .join(&self.task.config.steps[index].name),
            None => self.dir.clone(),
        }
    }

    /// Kills every process of the policy, then verifies the task (or the current step)
    /// where a trial would.
    pub(super) async fn grade(&mut self, backend: &B) -> Result<Graded, GradeFailure> {
        for (_, bg) in std::mem::take(&mut self.background) {
            let _ = self
                .sandbox
                .exec(ExecRequest::runner_own(scripts::bg_kill(bg.pgid)))
                .await;
        }
        self.sweep()
            .await
            .map_err(|broken| GradeFailure::new(broken.0, None))?;
        let task = self.task.clone();
        let step = self.current_step();
        let out_dir = self.verification_dir();
        let timeout_sec = match step {
            Some(index) => task.config.steps[index].verifier.timeout_sec,
            None => task.config.verifier.timeout_sec,
        };
        let timeout = Duration::from_secs_f64(timeout_sec.max(1.0));
        let setup = engine::phases::separate_verifier_setup(
            &task,
            step,
            self.spec.clone(),
            &self.spec.trial_name,
        )?;
        let step_config = step.map(|index| &task.config.steps[index]);
        let artifacts_dir = out_dir.join("artifacts");
        let log = |line: &str| self.log.line(line);
        let warn = |text: &str| self.log.line(&format!("warning: {text}"));
        let collection = PhasedCollection::of_task(
            &task.config,
            step_config.map_or(&[][..], |s| &s.verifier.collect),
            step_config.map_or(&[][..], |s| &s.artifacts),
            Collection {
                artifacts_dir: &artifacts_dir,
                convention: Convention::Download,
                copy_cap: self.spec.limits.download_cap_bytes,
                log: &log,
            },
            &warn,
        );
        let specs = collection.specs.clone();
        // Collected as a trial collects (hooks on main, then main's artifacts, then the
        // sidecars' with main frozen): all a separate verifier sees of the episode, what a
        // step leaves before the next one empties /logs/artifacts, and what the hooks write
        // for a shared verifier to read. A shared single-step verification with neither hooks
        // nor sidecar artifacts reads the container as it is and needs no copy.
        if setup.is_some() || step.is_some() || collection.has_hooks_or_sidecars() {
            let environment = self.environment.as_ref().ok_or_else(|| {
                GradeFailure::new(
                    "the episode's environment is gone",
                    Some(ExceptionType::EnvironmentError),
                )
            })?;
            collection.run(environment).await?;
        }
        let mut notes = VerifyNotes::default();
        let outcome = match setup {
            Some(setup) => {
                let place = SeparatePlace {
                    step,
                    out_dir: &out_dir,
                    artifacts_dir: &artifacts_dir,
                    specs: &specs,
                    timeout,
                };
                self.verify_separately(backend, setup, place, &mut notes)
                    .await?
            }
            None => {
                let phase = network_plan(&task, step).verifier_phase;
                self.set_network(access(phase), "verifier")
                    .await
                    .map_err(|e| {
                        GradeFailure::new(e.to_string(), Some(ExceptionType::EnvironmentError))
                    })?;
                let deadline = Instant::now() + timeout;
                match step {
                    None => {
                        verifiers::verify(&self.sandbox, &task, &out_dir, deadline, &mut notes)
                            .await?
                    }
                    Some(index) => {
                        verifiers::verify_step(
                            &self.sandbox,
                            &task,
                            index,
                            &out_dir,
                            deadline,
                            &mut notes,
                        )
                        .await?
                    }
                }
            }
        };
        Ok(Graded {
            result: outcome.result,
            leftovers: notes.leftover_processes.len(),
        })
    }

    /// Starts the separate verifier's container (its start bounded by the task's build
    /// timeout, not the tests'), verifies in it and removes it, on every path.
    async fn verify_separately(
        &self,
        backend: &B,
        setup: SeparateVerifierSetup,
        place: SeparatePlace<'_>,
        notes: &mut VerifyNotes,
    ) -> Result<VerifierOutcome, GradeFailure> {
        let task = &self.task;
        // Its image's build output goes nowhere, as the episode image's does.
        let quiet: OutputSink = Arc::new(|_, _| {});
        let limit = Duration::from_secs_f64(task.config.environment.build_timeout_sec.max(1.0));
        let environment = tokio::time::timeout(
            limit,
            backend.start_verifier_environment(task, &setup.image, &setup.spec, &quiet),
        )
        .await
        .map_err(|_| {
            GradeFailure::new(
                format!(
                    "the separate verifier environment did not start within {} s",
                    limit.as_secs()
                ),
                Some(ExceptionType::EnvironmentStartTimeoutError),
            )
        })?
        .map_err(|e| {
            GradeFailure::new(
                format!("starting the separate verifier environment: {e}"),
                Some(ExceptionType::EnvironmentStartError),
            )
        })?;
        let what = environment.describe();
        self.log.line(&format!(
            "started the separate verifier environment: {what}"
        ));
        let verified = self.verify_in(&environment, &setup, place, notes).await;
        match tokio::time::timeout(REMOVE_TIMEOUT, environment.remove()).await {
            Ok(Ok(())) => self.log.line(&format!("removed {what}")),
            Ok(Err(e)) => self.log.line(&format!("removing {what} failed: {e}")),
            Err(_) => self.log.line(&format!("removing {what} took too long")),
        }
        verified
    }

    /// In the separate verifier's container: the artifacts uploaded, the verification's
    /// network set, then the image's own tests run.
    async fn verify_in(
        &self,
        environment: &B::Environment,
        setup: &SeparateVerifierSetup,
        place: SeparatePlace<'_>,
        notes: &mut VerifyNotes,
    ) -> Result<VerifierOutcome, GradeFailure> {
        let verifier = environment.main();
        let uploaded = upload_artifacts(verifier, place.specs, place.artifacts_dir, CONVENTION_DIR)
            .await
            .map_err(|e| {
                GradeFailure::new(
                    format!("uploading the artifacts to the verifier: {e}"),
                    Some(ExceptionType::EnvironmentError),
                )
            })?;
        for source in uploaded {
            self.log
                .line(&format!("artifact {source}: uploaded to the verifier"));
        }
        if setup.phase != setup.baseline {
            environment
                .set_network(access(setup.phase))
                .await
                .map_err(|e| {
                    GradeFailure::new(
                        format!("switching the separate verifier's network: {e}"),
                        Some(ExceptionType::EnvironmentError),
                    )
                })?;
        }
        let deadline = Instant::now() + place.timeout;
        let outcome = verifiers::verify_with_image_tests(
            verifier,
            &self.task,
            place.step,
            place.out_dir,
            deadline,
            notes,
        )
        .await?;
        Ok(outcome)
    }
}
