//! Watching `storage_mb` where the storage driver cannot enforce it: the environment's
//! writable layer is measured every few seconds while the agent and the verifier run, and the
//! trial is stopped with `StorageLimitExceededError` once it is past the limit. The agent's
//! run is measured once more as it ends ([`StorageWatch::guard_to_the_end`]), so a layer that
//! grew past the limit between two looks (an agent that writes fast and exits) is caught
//! before the verification runs on a full disk. (One look is one engine inspect with sizes,
//! about half a second here, so the other phases are not measured again at their end.)

use std::future::Future;
use std::time::Duration;

use tasks::{ExceptionType, Sandbox};

use super::Trial;
use super::log::TrialLog;
use crate::backend::{Backend, Environment};
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

    /// As [`Self::guard`], and a phase that ended well is measured once more: the failure
    /// when the layer is past the limit by then. That last look starts when `command_ended`
    /// fires (the agent's command has exited; what the phase does after it, the download of
    /// `/logs/agent`, only reads the container) or when the phase drops it, and the phase's
    /// result waits for it: the look is the same, only no longer after the download.
    pub(super) async fn guard_to_the_end<T>(
        &self,
        phase: impl Future<Output = Result<T, TrialFailure>>,
        command_ended: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<T, TrialFailure> {
        let Some(sandbox) = &self.sandbox else {
            return phase.await;
        };
        let last_look = async {
            // Fired, or dropped with the phase: either way the agent's command is over.
            let _ = command_ended.await;
            self.look(sandbox, &mut true).await
        };
        let (value, last) = tokio::join!(self.guard(phase), last_look);
        let value = value?;
        match last {
            Some(failure) => Err(failure),
            None => Ok(value),
        }
    }

    async fn exceeded(&self, sandbox: &S) -> TrialFailure {
        let mut warned = false;
        loop {
            tokio::time::sleep(self.interval).await;
            if let Some(failure) = self.look(sandbox, &mut warned).await {
                return failure;
            }
        }
    }

    /// One measurement: the failure when the layer is past the limit. A measurement that
    /// fails is logged once (`warned`) and passes.
    async fn look(&self, sandbox: &S, warned: &mut bool) -> Option<TrialFailure> {
        match sandbox.disk_usage().await {
            Ok(Some(used)) if used > self.limit_bytes => Some(TrialFailure::new(
                ExceptionType::StorageLimitExceededError,
                format!(
                    "the environment wrote {} MB, past the trial's storage_mb = {}; the trial was stopped",
                    used >> 20,
                    self.limit_bytes >> 20
                ),
            )),
            Ok(_) => None,
            Err(e) => {
                if !*warned {
                    *warned = true;
                    self.log
                        .line(&format!("storage watch: measuring disk usage failed: {e}"));
                }
                None
            }
        }
    }
}

impl<B: Backend> Trial<B> {
    /// A watch of `storage_mb` when the environment does not enforce it itself.
    pub(super) fn storage_watch(&self) -> StorageWatch<<B::Environment as Environment>::Sandbox> {
        use tasks::records::StorageEnforcement;
        let watched = self.limits.storage_enforcement == StorageEnforcement::Watched;
        StorageWatch::new(
            self.sandbox().ok().filter(|_| watched),
            self.limits.storage_mb,
            self.ctx.limits.storage_check_interval,
            self.log.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tasks::{ExecOutput, ExecRequest, SandboxError};

    use super::*;

    /// A sandbox whose writable layer grows by `step` bytes at every measurement.
    struct Growing {
        used: AtomicU64,
        step: u64,
    }

    impl Sandbox for Growing {
        async fn exec(&self, _: ExecRequest) -> Result<ExecOutput, SandboxError> {
            Err(SandboxError::new("exec", "not in this test"))
        }
        async fn upload_dir(&self, _: &Path, _: &str) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn upload_bytes(&self, _: Vec<u8>, _: &str, _: u32) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn download_dir(&self, _: &str, _: &Path) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn disk_usage(&self) -> Result<Option<u64>, SandboxError> {
            Ok(Some(
                self.used.fetch_add(self.step, Ordering::SeqCst) + self.step,
            ))
        }
    }

    fn watch(step: u64, limit_mb: Option<u64>) -> StorageWatch<Growing> {
        let dir = tempfile::tempdir().unwrap();
        let log = TrialLog::open(&dir.path().join("trial.log"), 1 << 20);
        StorageWatch::new(
            Some(Growing {
                used: AtomicU64::new(0),
                step,
            }),
            limit_mb,
            Duration::from_millis(100),
            log,
        )
    }

    #[tokio::test]
    async fn a_phase_that_fills_the_disk_is_stopped_with_a_typed_error() {
        let endless = std::future::pending::<Result<(), TrialFailure>>();
        let failure = watch(40 << 20, Some(100)).guard(endless).await.unwrap_err();
        assert_eq!(failure.kind, ExceptionType::StorageLimitExceededError);
        assert!(
            failure.message.contains("storage_mb = 100"),
            "{}",
            failure.message
        );
    }

    #[tokio::test]
    async fn a_phase_that_ends_past_the_limit_between_two_looks_is_caught_at_its_end() {
        // The first measurement (at the phase's end, before any periodic look) is past it.
        let quick = async { Ok::<_, TrialFailure>(()) };
        let (_, ended) = tokio::sync::oneshot::channel();
        let failure = watch(200 << 20, Some(100))
            .guard_to_the_end(quick, ended)
            .await
            .unwrap_err();
        assert_eq!(failure.kind, ExceptionType::StorageLimitExceededError);
        // Measured from the command's end while the phase goes on (its download).
        let (said, ended) = tokio::sync::oneshot::channel();
        let downloading = async move {
            let _ = said.send(());
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok::<_, TrialFailure>(())
        };
        let failure = watch(200 << 20, Some(100))
            .guard_to_the_end(downloading, ended)
            .await
            .unwrap_err();
        assert_eq!(failure.kind, ExceptionType::StorageLimitExceededError);
        // Only measured at its end when asked.
        let quick = async { Ok::<_, TrialFailure>(()) };
        assert!(watch(200 << 20, Some(100)).guard(quick).await.is_ok());
        // A phase's own failure is returned as it is, unmeasured.
        let failed = async { Err::<(), _>(TrialFailure::cancelled()) };
        let (_, ended) = tokio::sync::oneshot::channel();
        let failure = watch(200 << 20, Some(100))
            .guard_to_the_end(failed, ended)
            .await
            .unwrap_err();
        assert_eq!(failure.kind, ExceptionType::CancelledError);
    }

    #[tokio::test]
    async fn a_phase_within_the_limit_or_without_one_ends_on_its_own() {
        let phase = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, TrialFailure>(7)
        };
        assert_eq!(watch(1 << 20, Some(100)).guard(phase).await.unwrap(), 7);
        let unwatched = watch(u64::MAX / 4, None);
        assert_eq!(unwatched.guard(async { Ok(1) }).await.unwrap(), 1);
    }
}
