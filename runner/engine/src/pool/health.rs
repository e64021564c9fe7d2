//! The pool's health probe: each engine pinged every second; one that does not answer within
//! [`PING_TIMEOUT`] is drained (placement skips it) and taken back when it answers again,
//! each change told through the pool's notice.

use std::sync::Weak;
use std::time::Duration;

use super::Inner;
use crate::backend::Backend;

/// How often each engine is pinged.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a ping may take before the engine counts as gone.
const PING_TIMEOUT: Duration = Duration::from_secs(3);

/// True when `backend` answers a ping in time.
pub(super) async fn answers<B: Backend>(backend: &B) -> bool {
    matches!(
        tokio::time::timeout(PING_TIMEOUT, backend.ping()).await,
        Ok(Ok(()))
    )
}

/// Marks `engine` healthy or drained, telling the pool's notice when that changes.
pub(super) fn set_health<B: Backend>(inner: &Inner<B>, engine: usize, healthy: bool) {
    let changed = {
        let mut state = inner.state.lock().unwrap();
        let slot = &mut state.slots[engine];
        let changed = slot.healthy != healthy;
        slot.healthy = healthy;
        changed
    };
    if changed {
        let name = &inner.engines[engine].name;
        (inner.notice)(&if healthy {
            format!("engine {name} answers again: it takes trials again")
        } else {
            format!(
                "engine {name} does not answer: drained (its running trials end as infrastructure errors and are retried on the others)"
            )
        });
    }
}

/// Probes every engine of the pool until the pool is dropped.
pub(super) fn spawn_probe<B: Backend>(pool: Weak<Inner<B>>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            let Some(inner) = pool.upgrade() else {
                return;
            };
            for (index, engine) in inner.engines.iter().enumerate() {
                let healthy = answers(&engine.backend).await;
                set_health(&inner, index, healthy);
            }
        }
    });
}
