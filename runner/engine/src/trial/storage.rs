//! Watching `storage_mb` where the storage driver cannot enforce it: the environment's
//! writable layer is measured every few seconds while the agent and the verifier run, and the
//! trial is stopped with `StorageLimitExceededError` once it is past the limit.

use std::future::Future;
use std::time::Duration;

use tasks::{ExceptionType, Sandbox};

use super::log::TrialLog;
use crate::failure::TrialFailure;

/// A watch over one environment, or none (no limit, or the driver enforces it).
pub(super) struct StorageWatch<S> {
    sandbox: Option<S>,
    limit_bytes: u64,
    interval: Duration,
    log: TrialLog,
}

impl<S: Sandbox> StorageWatch<S> {
    /// A watch of `sandbox` against `limit_mb`; `None` for either means nothing is watched.
    pub(super) fn new(
        sandbox: Option<S>,
        limit_mb: Option<u64>,
        interval: Duration,
        log: TrialLog,
    ) -> Self {
        let limit_bytes = limit_mb.map_or(0, |mb| mb.saturating_mul(1 << 20));
        Self {
            sandbox: sandbox.filter(|_| limit_mb.is_some()),
            limit_bytes,
            interval: interval.max(Duration::from_millis(100)),
            log,
        }
    }

    /// Runs `phase`, stopping it with `StorageLimitExceededError` if the limit is passed first.
    pub(super) async fn guard<T>(
        &self,
        phase: impl Future<Output = Result<T, TrialFailure>>,
    ) -> Result<T, TrialFailure> {
        let Some(sandbox) = &self.sandbox else {
            return phase.await;
        };
        tokio::select! {
            biased;
            ended = phase => ended,
            failure = self.exceeded(sandbox) => Err(failure),
        }
    }

    async fn exceeded(&self, sandbox: &S) -> TrialFailure {
        let mut warned = false;
        loop {
            tokio::time::sleep(self.interval).await;
            match sandbox.disk_usage().await {
                Ok(Some(used)) if used > self.limit_bytes => {
                    return TrialFailure::new(
                        ExceptionType::StorageLimitExceededError,
                        format!(
                            "the environment wrote {} MB, past the task's storage_mb = {}; the trial was stopped",
                            used >> 20,
                            self.limit_bytes >> 20
                        ),
                    );
                }
                Ok(_) => {}
                Err(e) if !warned => {
                    warned = true;
                    self.log
                        .line(&format!("storage watch: measuring disk usage failed: {e}"));
                }
                Err(_) => {}
            }
        }
    }
}
