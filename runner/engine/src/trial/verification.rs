//! Verification (delegated to the `verifiers` crate) and collection of what the trial left.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tasks::Sandbox;
use tasks::records::VerifierResult;
use verifiers::VerifyNotes;

use super::Trial;
use super::egress::EgressPhase;
use super::phase_network::NetworkPlan;
use super::record::{finish_timing, start_timing};
use super::separate_verifier::{COPY_TIMEOUT, SeparateVerifierHooks};
use super::verify_order::{VerifyDriver, VerifyPlace, verify};
use crate::backend::{Backend, EnvironmentSpec, IMAGE_PROGRESS_STREAM, OutputSink, SandboxOf};
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
        start_timing(&mut self.result.verifier);
        let dir = self.dir.clone();
        let verified = self.verify(None, &dir).await;
        finish_timing(&mut self.result.verifier);
        self.result.verifier_result = Some(verified??);
        Ok(())
    }

    /// Verifies the task (`step` `None`) or step `step` (its outputs into `out_dir`, with the
    /// artifacts collected in `out_dir/artifacts`) where its config says, in the engine's one
    /// order ([`verify`]) within the phase's deadline. The outer error is a network switch or
    /// egress change that failed: it ends the trial; the inner result is the verification's.
    pub(super) async fn verify(
        &mut self,
        step: Option<usize>,
        out_dir: &Path,
    ) -> Result<Result<VerifierResult, TrialFailure>, TrialFailure> {
        let task = self.plan.task.clone();
        let place = VerifyPlace {
            step,
            out_dir,
            timeout: self.timeouts.verifier,
            start_limit: self.timeouts.environment_build,
        };
        let (ctx, log) = (self.ctx.clone(), self.log.clone());
        let mut driver = TrialVerify {
            trial: self,
            step,
            egress_port: None,
        };
        verify(&ctx.backend, &mut driver, &task, place, &log).await
    }

    /// Records how the verifier was isolated and what the agent left running, in the result
    /// and in `trial.log`.
    fn record_notes(&mut self, mut notes: VerifyNotes) {
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

/// What a trial does around a verification ([`VerifyDriver`]): its watchdog's phases, the
/// agent container's network and egress moved for a shared one, a separate verifier's egress
/// relay and upload bound, and the notes recorded.
struct TrialVerify<'t, B: Backend> {
    trial: &'t mut Trial<B>,
    step: Option<usize>,
    /// The port of the egress relay to start in a separate verifier, for a task with an
    /// allowlist.
    egress_port: Option<u16>,
}

impl<B: Backend> SeparateVerifierHooks<SandboxOf<B>> for TrialVerify<'_, B> {
    fn starting(&mut self) {
        self.trial.enter(Phase::Environment);
    }

    fn started(&mut self) {
        self.trial.enter(Phase::Verifier);
    }

    fn upload_limit(&self) -> Option<Duration> {
        Some(COPY_TIMEOUT)
    }

    async fn before_tests(&mut self, verifier: &SandboxOf<B>) -> Result<(), TrialFailure> {
        if let Some(port) = self.egress_port {
            self.trial.egress_separate_verifier(verifier, port).await?;
        }
        Ok(())
    }

    fn tests_ran(&mut self, notes: VerifyNotes) {
        self.trial.record_notes(notes);
    }
}

impl<B: Backend> VerifyDriver<B> for TrialVerify<'_, B> {
    fn agent_spec(&self) -> EnvironmentSpec {
        self.trial.environment_spec("")
    }

    fn build_output(&self) -> OutputSink {
        // Progress lines are for the live view; trial.log keeps the build's own output.
        let progress = self.trial.observer.output.clone();
        Arc::new(move |stream: &str, bytes: &[u8]| {
            if stream != IMAGE_PROGRESS_STREAM {
                progress(stream, bytes);
            }
        })
    }

    fn separate_spec(&mut self, spec: &mut EnvironmentSpec) {
        // An allowlist's way out: the trial's proxy, through a relay of this container's own.
        self.egress_port = self.trial.with_separate_verifier_egress(spec);
    }

    async fn to_verifier_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
        let (from, to) = (network.agent_baseline, network.verifier_phase);
        self.trial.switch_network("verifier", from, to).await?;
        self.trial.egress_phase(EgressPhase::Verifier).await
    }

    async fn leave_verifier_network(&mut self, network: &NetworkPlan) -> Result<(), TrialFailure> {
        if self.step.is_none() {
            // A single-step trial's container has no phase left that needs its baseline.
            return Ok(());
        }
        let (from, to) = (network.verifier_phase, network.agent_baseline);
        self.trial.switch_network("next step", from, to).await?;
        self.trial.egress_policy(EgressPhase::Setup).map(drop)
    }

    fn agent_sandbox(&self) -> Result<SandboxOf<B>, TrialFailure> {
        self.trial.sandbox()
    }

    fn shared_notes(&self, step: Option<usize>) -> VerifyNotes {
        let mut notes = VerifyNotes {
            agent_toolchain: self.trial.plan.config.verifier.agent_toolchain,
            ..VerifyNotes::default()
        };
        if step.is_none() {
            // The end-of-trial download of /logs/artifacts rides along with the results.
            notes.then_download = Some((
                super::artifacts::CONVENTION_DIR.to_owned(),
                self.trial.dir.join("artifacts"),
            ));
        }
        notes
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
