//! One verification of an episode, as a trial verifies: every process of the policy killed,
//! the task's (and the step's) `[[verifier.collect]]` hooks run and its artifacts, a
//! sidecar's included, collected as a trial's are ([`engine::phases::PhasedCollection`]),
//! then the task's tests (a multi-step task's: the current step's) in the engine's one order
//! ([`engine::phases::verify`]): in the agent's container, in the verifier jail under the
//! verifier's network, or in a fresh container of a separate verifier that runs its image's
//! own `/tests` and receives only the declared artifacts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use engine::phases::{
    Collection, Convention, NetworkPlan, PhasedCollection, SeparateVerifierHooks, VerifyDriver,
    VerifyPlace,
};
use engine::{Backend, EnvironmentSpec, OutputSink, SandboxOf, TrialFailure};
use tasks::ExceptionType;
use tasks::records::VerifierResult;
use verifiers::VerifyNotes;

use super::Episode;

/// A verification that ran to a result.
pub struct Graded {
    /// The verifier's result (rewards, exit code, named checks).
    pub result: VerifierResult,
    /// How many processes of the policy were still running as the tests started.
    pub leftovers: usize,
}

/// A verification that gave no result: why, and its exception type (`None`: the container
/// no longer answers).
#[derive(Debug)]
pub struct GradeFailure {
    pub message: String,
    pub kind: Option<ExceptionType>,
}

impl From<TrialFailure> for GradeFailure {
    fn from(failure: TrialFailure) -> Self {
        let kind = Some(failure.kind);
        Self {
            message: failure.message,
            kind,
        }
    }
}

/// What an episode does around the engine's verification order ([`engine::phases::verify`]):
/// its container's network kept in step, and the notes kept (a trial's watchdog phases,
/// upload bound and egress relays are not an episode's).
struct EpisodeVerify<'e, B: Backend> {
    episode: &'e mut Episode<B>,
    notes: VerifyNotes,
}

impl<B: Backend> SeparateVerifierHooks<SandboxOf<B>> for EpisodeVerify<'_, B> {
    fn tests_ran(&mut self, notes: VerifyNotes) {
        self.notes = notes;
    }
}

impl<B: Backend> VerifyDriver<B> for EpisodeVerify<'_, B> {
    fn agent_spec(&self) -> EnvironmentSpec {
        self.episode.spec.clone()
    }

    fn build_output(&self) -> OutputSink {
        // A separate verifier's build output goes nowhere, as the episode image's does.
        Arc::new(|_, _| {})
    }

    async fn to_verifier_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
        self.episode
            .set_network(network.verifier_phase, "verifier")
            .await
    }

    fn agent_sandbox(&self) -> Result<SandboxOf<B>, TrialFailure> {
        Ok(self.episode.policy.sandbox().clone())
    }
}

impl<B: Backend> Episode<B> {
    /// The step being verified (`None` for a single-step task).
    pub fn current_step(&self) -> Option<usize> {
        self.task.is_multi_step().then_some(self.step)
    }

    /// Where the current verification's outputs go: the episode's directory, or a step's
    /// `steps/<name>/` (as a trial's).
    pub fn verification_dir(&self) -> PathBuf {
        match self.current_step() {
            Some(index) => self
                .dir
                .join("steps")
                .join(&self.task.config.steps[index].name),
            None => self.dir.clone(),
        }
    }

    /// Kills every process of the policy, collects what the verifier needs, then verifies the
    /// task (or the current step) in the engine's one order ([`engine::phases::verify`]).
    pub async fn grade(&mut self, backend: &B) -> Result<Graded, GradeFailure> {
        self.policy
            .stop_all()
            .await
            .map_err(|broken| GradeFailure {
                message: broken.0,
                kind: None,
            })?;
        let task = self.task.clone();
        let step = self.current_step();
        let out_dir = self.verification_dir();
        let artifacts_dir = out_dir.join("artifacts");
        self.collect(step, &artifacts_dir).await?;
        let timeout_sec = match step {
            Some(index) => task.config.steps[index].verifier.timeout_sec,
            None => task.config.verifier.timeout_sec,
        };
        let place = VerifyPlace {
            step,
            out_dir: &out_dir,
            timeout: Duration::from_secs_f64(timeout_sec.max(1.0)),
            start_limit: Duration::from_secs_f64(
                task.config.environment.build_timeout_sec.max(1.0),
            ),
        };
        let log = self.log.clone();
        let mut driver = EpisodeVerify {
            episode: self,
            notes: VerifyNotes::default(),
        };
        let verified = engine::phases::verify(backend, &mut driver, &task, place, &log).await;
        let leftovers = driver.notes.leftover_processes.len();
        Ok(Graded {
            result: verified??,
            leftovers,
        })
    }

    /// Collects as a trial collects (hooks on main, then main's artifacts, then the
    /// sidecars' with main frozen): all a separate verifier sees of the episode, what a step
    /// leaves before the next one empties /logs/artifacts, and what the hooks write for a
    /// shared verifier to read. A shared single-step verification with neither hooks nor
    /// sidecar artifacts reads the container as it is and needs no copy.
    async fn collect(
        &self,
        step: Option<usize>,
        artifacts_dir: &std::path::Path,
    ) -> Result<(), GradeFailure> {
        let config = &self.task.config;
        let step_config = step.map(|index| &config.steps[index]);
        let log = |line: &str| self.log.line(line);
        let warn = |text: &str| self.log.line(&format!("warning: {text}"));
        let collection = PhasedCollection::of_task(
            config,
            step_config.map_or(&[][..], |s| &s.verifier.collect),
            step_config.map_or(&[][..], |s| &s.artifacts),
            Collection {
                artifacts_dir,
                convention: Convention::Download,
                copy_cap: self.spec.limits.download_cap_bytes,
                log: &log,
            },
            &warn,
        );
        let hooks_or_sidecars =
            !collection.hooks.is_empty() || collection.specs.iter().any(|s| s.sidecar().is_some());
        let separate = engine::phases::is_separate(&self.task, step_config);
        if !(separate || step.is_some() || hooks_or_sidecars) {
            return Ok(());
        }
        let gone = || TrialFailure::new(ExceptionType::EnvironmentError, "the environment is gone");
        let environment = self.environment.as_ref().ok_or_else(gone)?;
        collection.run(environment).await?;
        Ok(())
    }
}
