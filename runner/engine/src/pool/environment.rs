//! An environment started through the pool: the engine's own environment, the name of the
//! engine it runs on, and the room it holds there until it is removed or dropped.

use std::sync::Arc;

use super::Inner;
use super::placement::Demand;
use tasks::records::StorageEnforcement;

use crate::backend::{Backend, BackendError, Environment, NetworkAccess, ServiceState};

/// Room held on one engine of the pool; given back when dropped.
pub(super) struct Reservation<B: Backend> {
    pool: Arc<Inner<B>>,
    engine: usize,
    demand: Demand,
}

impl<B: Backend> Reservation<B> {
    pub(super) fn new(pool: Arc<Inner<B>>, engine: usize, demand: Demand) -> Self {
        Self {
            pool,
            engine,
            demand,
        }
    }
}

impl<B: Backend> Drop for Reservation<B> {
    fn drop(&mut self) {
        let mut state = self.pool.state.lock().unwrap();
        let slot = &mut state.slots[self.engine];
        slot.load = slot.load.minus(self.demand);
    }
}

/// Type-erased so [`PoolEnvironment`] need not name the pool's backend type.
trait Held: Send + Sync {}
impl<B: Backend> Held for Reservation<B> {}

/// An environment on one engine of an [`super::EnginePool`].
pub struct PoolEnvironment<E> {
    inner: E,
    engine: String,
    _room: Box<dyn Held>,
}

impl<E: Environment> PoolEnvironment<E> {
    pub(super) fn new<B: Backend>(inner: E, engine: String, room: Reservation<B>) -> Self {
        Self {
            inner,
            engine,
            _room: Box::new(room),
        }
    }
}

impl<E: Environment> Environment for PoolEnvironment<E> {
    type Sandbox = E::Sandbox;

    fn main(&self) -> &Self::Sandbox {
        self.inner.main()
    }

    fn describe(&self) -> String {
        format!("{} on engine {}", self.inner.describe(), self.engine)
    }

    async fn remove(self) -> Result<(), BackendError> {
        // The room is given back once the removal returned (or failed: the engine's sweep
        // is then the backstop, and the trial no longer runs there).
        self.inner.remove().await
    }

    async fn set_network(&self, access: NetworkAccess) -> Result<(), BackendError> {
        self.inner.set_network(access).await
    }

    async fn main_state(&self) -> Result<Option<ServiceState>, BackendError> {
        self.inner.main_state().await
    }

    fn storage_enforcement(&self) -> StorageEnforcement {
        self.inner.storage_enforcement()
    }

    fn engine(&self) -> Option<&str> {
        Some(&self.engine)
    }
}
