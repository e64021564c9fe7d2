//! One verification of an episode, as a trial verifies: every process of the policy killed,
//! then the task's tests (a multi-step task's: the current step's). In the agent's container
//! they run in the verifier jail under the verifier's network ([`engine::phases::run_tests`]).
//! A verifier with an environment of its own (`[verifier] environment_mode = "separate"`) gets
//! a fresh container made, run and removed as a trial's is
//! ([`engine::phases::run_separately`]): it runs its image's own `/tests` and receives only
//! the declared artifacts collected from the episode's container (and `/logs/artifacts`).
//! Before the tests, the task's (and the step's) `[[verifier.collect]]` hooks run and its
//! artifacts, a sidecar's included, are collected exactly as a trial's are
//! ([`engine::phases::PhasedCollection`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use engine::phases::{
    Collection, Convention, NetworkPlan, PhasedCollection, SeparatePlace, SeparateVerifierHooks,
};
use engine::{Backend, OutputSink, TrialFailure};
use tasks::records::VerifierResult;
use tasks::{ExceptionType, Sandbox};
use verifiers::{VerifierError, VerifyNotes};

use super::Episode;

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

/// What an episode does around a verification's order: it keeps the notes (a trial's phase
/// changes, upload bound and egress relay are not an episode's).
#[derive(Default)]
struct Noted(VerifyNotes);

impl<S: Sandbox> SeparateVerifierHooks<S> for Noted {
    fn tests_ran(&mut self, notes: VerifyNotes) {
        self.0 = notes;
    }
}

impl<B: Backend> Episode<B> {
    /// The step being verified (`None` for a single-step task).
    pub(super) fn current_step(&self) -> Option<usize> {
        self.task.is_multi_step().then_some(self.step)
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
        self.policy
            .stop_all()
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
        let hooks_or_sidecars =
            !collection.hooks.is_empty() || collection.specs.iter().any(|s| s.sidecar().is_some());
        if setup.is_some() || step.is_some() || hooks_or_sidecars {
            let environment = self.environment.as_ref().ok_or_else(|| {
                GradeFailure::new(
                    "the episode's environment is gone",
                    Some(ExceptionType::EnvironmentError),
                )
            })?;
            collection.run(environment).await?;
        }
        let mut noted = Noted::default();
        let outcome = match setup {
            Some(setup) => {
                let place = SeparatePlace {
                    step,
                    out_dir: &out_dir,
                    artifacts_dir: &artifacts_dir,
                    specs: &specs,
                    timeout,
                    start_limit: Duration::from_secs_f64(
                        task.config.environment.build_timeout_sec.max(1.0),
                    ),
                };
                // Its image's build output goes nowhere, as the episode image's does.
                let quiet: OutputSink = Arc::new(|_, _| {});
                let log = &self.log;
                engine::phases::run_separately(
                    backend, &task, &setup, place, log, &quiet, &mut noted,
                )
                .await?
            }
            None => {
                let phase = NetworkPlan::resolve(&task.config, step_config).verifier_phase;
                self.set_network(phase, "verifier").await?;
                engine::phases::run_tests(
                    self.policy.sandbox(),
                    &task,
                    step,
                    &out_dir,
                    timeout,
                    &mut noted.0,
                )
                .await?
            }
        };
        Ok(Graded {
            result: outcome.result,
            leftovers: noted.0.leftover_processes.len(),
        })
    }
}
