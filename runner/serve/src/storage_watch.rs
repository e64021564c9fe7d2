//! The episode's `storage_mb`, watched where the storage driver cannot enforce it (as a
//! trial's is): the container's writable layer is measured every few seconds for the whole
//! episode, between actions too (a background process may write while the policy thinks).
//! Past the limit every process of the policy is killed at once, and the episode's next
//! step ends it with `StorageLimitExceededError`. A look is one engine inspect with sizes,
//! which the engine computes by walking the layer: the server's episodes take turns (`looks`,
//! a few at a time), since 32 episodes measuring at once every 2 s made every `exec` of the
//! server several times slower (bench/serve.sh).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tasks::Sandbox;
use tokio::sync::Semaphore;

/// A running watch; dropping it stops the watch.
pub struct StorageWatch {
    exceeded: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StorageWatch {
    /// Watches `sandbox` against `limit_mb` every `interval` (at the soonest: a look waits
    /// for one of the server's `looks`); past it, kills every process of the container but
    /// PID 1 and `own_pids`.
    pub fn start<S: Sandbox + Clone + 'static>(
        sandbox: S,
        limit_mb: u64,
        interval: Duration,
        own_pids: Vec<u32>,
        looks: Arc<Semaphore>,
    ) -> Self {
        let exceeded = Arc::new(Mutex::new(None));
        let flag = exceeded.clone();
        let limit_bytes = limit_mb.saturating_mul(1 << 20);
        let interval = interval.max(Duration::from_millis(100));
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Ok(_turn) = looks.acquire().await else {
                    return;
                };
                let Ok(Some(used)) = sandbox.disk_usage().await else {
                    continue;
                };
                if used <= limit_bytes {
                    continue;
                }
                let message = format!(
                    "the environment wrote {} MB, past the task's storage_mb = {limit_mb}; every process of the policy was killed and the episode is closed",
                    used >> 20
                );
                if let Ok(mut slot) = flag.lock() {
                    *slot = Some(message);
                }
                let sweep = crate::actions::sweep_request(&[], &own_pids);
                let _ = sandbox.exec(sweep).await;
                return;
            }
        });
        Self { exceeded, task }
    }

    /// Why the episode must end, once the limit was passed.
    pub fn exceeded(&self) -> Option<String> {
        self.exceeded.lock().ok().and_then(|slot| slot.clone())
    }
}

impl Drop for StorageWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
