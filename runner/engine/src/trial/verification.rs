//! Verification (delegated to the `verifiers` crate) and collection of what the trial left.

use std::path::Path;
use std::time::{Duration, Instant};

use tasks::records::VerifierResult;
use tasks::{Sandbox, Task};

use super::Trial;
use super::record::{finish_timing, start_timing};
use crate::backend::Backend;
use crate::events::Phase;
use crate::failure::TrialFailure;

/// The longest a download of logs or artifacts may take (a capped download of a healthy engine
/// takes seconds; this guards against an engine that stops answering).
const COLLECT_TIMEOUT: Duration = Duration::from_secs(300);

impl<B: Backend> Trial<B> {
    /// Runs the task's tests and records the reward, or the verifier's failure with what it
    /// learnt (exit code, named checks).
    pub(super) async fn verification(&mut self) -> Result<(), TrialFailure> {
        self.enter(Phase::Verifier);
        let separate = super::separate_verifier::is_separate(&self.plan.task, None);
        let network = self.network_plan();
        if !separate {
            self.switch_network("verifier", network.agent_baseline, network.verifier_phase)
                .await?;
            self.egress_phase(super::egress::EgressPhase::Verifier)
                .await?;
        }
        start_timing(&mut self.result.verifier);
        let timeout = self.timeouts.verifier;
        let verified = if separate {
            let artifacts = self.dir.join("artifacts");
            self.verify_separately(None, &artifacts, timeout).await
        } else {
            self.verify_tests(None, timeout).await
        };
        finish_timing(&mut self.result.verifier);
        self.result.verifier_result = Some(verified?);
        Ok(())
    }

    /// Runs the tests of the task (`step` `None`) or of step `index` of a multi-step task
    /// (its outputs into `<step_dir>/verifier/`) within `timeout`, recording the isolation
    /// notes; returns the verifier's result.
    pub(super) async fn verify_tests(
        &mut self,
        step: Option<(usize, &Path)>,
        timeout: Duration,
    ) -> Result<VerifierResult, TrialFailure> {
        let sandbox = self.sandbox()?;
        let mut notes = verifiers::VerifyNotes {
            agent_toolchain: self.plan.config.verifier.agent_toolchain,
            ..verifiers::VerifyNotes::default()
        };
        let out_dir = match step {
            None => {
                // The end-of-trial download of /logs/artifacts rides along with the results.
                notes.then_download = Some((
                    super::artifacts::CONVENTION_DIR.to_owned(),
                    self.dir.join("artifacts"),
                ));
                self.dir.as_path()
            }
            Some((_, dir)) => dir,
        };
        let index = step.map(|(index, _)| index);
        let task = &self.plan.task;
        let verified = run_tests(&sandbox, task, index, out_dir, timeout, &mut notes).await;
        self.record_notes(notes);
        Ok(verified?.result)
    }

    /// Records how the verifier was isolated and what the agent left running, in the result
    /// and in `trial.log`.
    pub(super) fn record_notes(&mut self, mut notes: verifiers::VerifyNotes) {
        // The egress relay of the verifier's phase is the runner's, not the agent's.
        let relays = self.egress_relay_pids();
        notes
            .leftover_processes
            .retain(|p| !relays.contains(&p.pid));
        match &notes.isolation {
            Some(isolation) if isolation.isolated => self
                .log
                .line(&format!("verifier isolated: {}", isolation.detail)),
            Some(isolation) => self.log.line(&format!(
                "warning: verifier isolation unavailable ({}); the tests ran beside whatever the agent left running",
                isolation.detail
            )),
            None => {}
        }
        if notes.leftover_processes.is_empty() {
            self.log.line("no process left running by the agent");
        } else {
            self.log.line(&format!(
                "{} process(es) left running by the agent when verification started:",
                notes.leftover_processes.len()
            ));
            for process in &notes.leftover_processes {
                self.log.line(&format!(
                    "  pid {} user {} : {}",
                    process.pid, process.user, process.command
                ));
            }
        }
        match (&notes.toolchain_changes, notes.agent_toolchain) {
            (Some(changes), _) if changes.is_empty() => self.log.line(
                "the tests' programs and startup hooks are the image's: the agent changed none",
            ),
            (Some(changes), agent) => {
                self.log.line(&format!(
                    "the agent changed {} of the tests' programs or startup hooks; the tests ran with {}:",
                    changes.len(),
                    if agent { "the agent's (--agent-toolchain)" } else { "the image's own" }
                ));
                for change in changes {
                    self.log.line(&format!("  {change}"));
                }
            }
            (None, _) => {}
        }
        for refused in &notes.refused_outputs {
            self.log
                .line(&format!("verifier output not kept whole: {refused}"));
        }
        self.artifacts.collected = notes.then_downloaded;
        self.result.verifier_isolation = notes.isolation;
        // A multi-step trial verifies once per step: what any step found stays recorded (a
        // later step does not see what runner already pinned over as the agent's again).
        self.result.verifier_toolchain_changes = merge_changes(
            self.result.verifier_toolchain_changes.take(),
            notes.toolchain_changes,
        );
        self.result.agent_leftover_processes = notes.leftover_processes;
    }

    /// Downloads `/logs/artifacts` into the trial's `artifacts/` (unless the verification
    /// brought it back already) and settles its entry in the manifest the agent phase wrote.
    pub(super) async fn collection(&mut self) {
        if !self.artifacts.collected {
            self.collect("/logs/artifacts", "artifacts").await;
        }
        if !self.artifacts.deferred.is_empty() {
            let log = |line: &str| self.log.line(line);
            super::artifacts::settle_convention(
                &mut self.artifacts.deferred,
                &self.dir.join("artifacts"),
                &log,
            );
        }
    }

    /// Downloads the environment directory `source` into `<trial>/<target>` within
    /// [`COLLECT_TIMEOUT`]; a failure is logged, never fatal (the reward does not depend on it).
    pub(super) async fn collect(&self, source: &str, target: &str) {
        self.collect_into(source, &self.dir.join(target)).await;
    }

    /// [`Self::collect`] into the host directory `target_dir`.
    pub(super) async fn collect_into(&self, source: &str, target_dir: &Path) {
        let Ok(sandbox) = self.sandbox() else { return };
        let download = sandbox.download_dir(source, target_dir);
        match tokio::time::timeout(COLLECT_TIMEOUT, download).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.log.line(&format!("collecting {source} failed: {e}")),
            Err(_) => self.log.line(&format!(
                "collecting {source} took longer than {} s; what arrived is kept",
                COLLECT_TIMEOUT.as_secs()
            )),
        }
    }
}

/// The tests of `task` (`step` `None`) or of its step `step`, in the agent's container
/// `sandbox` within `timeout`, their outputs into `out_dir`'s `verifier/` (a trial's or an
/// episode's directory, or a step's): the shared verification of a trial and of an episode
/// of `runner serve`, which switch the container's network to the verifier's before it.
pub async fn run_tests<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    step: Option<usize>,
    out_dir: &Path,
    timeout: Duration,
    notes: &mut verifiers::VerifyNotes,
) -> Result<verifiers::VerifierOutcome, verifiers::VerifierError> {
    let deadline = Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(Instant::now);
    match step {
        None => verifiers::verify(sandbox, task, out_dir, deadline, notes).await,
        Some(index) => verifiers::verify_step(sandbox, task, index, out_dir, deadline, notes).await,
    }
}

/// The changes recorded so far with a later verification's added (each once, in order).
fn merge_changes(earlier: Option<Vec<String>>, later: Option<Vec<String>>) -> Option<Vec<String>> {
    match (earlier, later) {
        (Some(mut all), Some(later)) => {
            for change in later {
                if !all.contains(&change) {
                    all.push(change);
                }
            }
            Some(all)
        }
        (earlier, later) => later.or(earlier),
    }
}

#[cfg(test)]
mod tests {
    use super::merge_changes;

    #[test]
    fn each_steps_toolchain_changes_stay_recorded() {
        let one = Some(vec!["/usr/bin/python3: changed by the agent".to_owned()]);
        let two = Some(vec![
            "/etc/ld.so.preload: added by the agent".to_owned(),
            "/usr/bin/python3: changed by the agent".to_owned(),
        ]);
        let merged = merge_changes(one.clone(), two).unwrap();
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0], "/usr/bin/python3: changed by the agent");
        assert_eq!(merge_changes(one.clone(), None), one);
        assert_eq!(merge_changes(None, Some(vec![])), Some(vec![]));
        assert_eq!(merge_changes(None, None), None);
    }
}
