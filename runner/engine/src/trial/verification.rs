//! Verification (delegated to the `verifiers` crate) and collection of what the trial left.

use std::time::Instant;

use tasks::Sandbox;

use super::Trial;
use super::record::{finish_timing, start_timing};
use crate::backend::Backend;
use crate::events::Phase;
use crate::failure::TrialFailure;

impl<B: Backend> Trial<B> {
    /// Runs the task's tests and records the reward, or the verifier's failure with what it
    /// learnt (exit code, named checks).
    pub(super) async fn verification(&mut self) -> Result<(), TrialFailure> {
        self.enter(Phase::Verifier);
        let sandbox = self.sandbox()?;
        start_timing(&mut self.result.verifier);
        let deadline = Instant::now()
            .checked_add(self.timeouts.verifier)
            .unwrap_or_else(Instant::now);
        let verified = verifiers::verify(&sandbox, &self.plan.task, &self.dir, deadline).await;
        finish_timing(&mut self.result.verifier);
        let outcome = verified?;
        self.result.verifier_result = Some(outcome.result);
        Ok(())
    }

    /// Downloads `/logs/artifacts` into the trial's `artifacts/`.
    pub(super) async fn collection(&mut self) {
        self.collect("/logs/artifacts", "artifacts").await;
    }

    /// Downloads the environment directory `source` into `<trial>/<target>`; a failure is
    /// logged, never fatal (the reward does not depend on it).
    pub(super) async fn collect(&self, source: &str, target: &str) {
        let Ok(sandbox) = self.sandbox() else { return };
        if let Err(e) = sandbox.download_dir(source, &self.dir.join(target)).await {
            self.log.line(&format!("collecting {source} failed: {e}"));
        }
    }
}
