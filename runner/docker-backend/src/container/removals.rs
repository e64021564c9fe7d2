//! Container removals nothing waits for: a trial's teardown asks for its containers' removal
//! and moves on (its record does not depend on it, and a removal costs as much as a start),
//! while the job's end waits for every removal it asked for before it sweeps, so the sweep
//! still reports only what a cancelled start left.

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use crate::connect::DockerClient;
use crate::container::remove_container;

/// The removals a backend has started and not yet seen finish.
#[derive(Clone, Default)]
pub(crate) struct Removals {
    pending: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Removals {
    /// Starts removing the containers `ids` (by id or name, in order); a failure goes to
    /// `on_error` (the trial's log, while it is open), and the job's sweep removes what is
    /// left.
    pub fn remove(
        &self,
        client: &DockerClient,
        ids: Vec<String>,
        on_error: impl Fn(String) + Send + 'static,
    ) {
        let client = client.clone();
        self.track(tokio::spawn(async move {
            for id in ids {
                if let Err(e) = remove_container(&client, &id).await {
                    on_error(format!(
                        "removing {id} failed: {e}; the job's sweep removes it"
                    ));
                }
            }
        }));
    }

    /// Tracks `task` as a removal (it may await other work first).
    pub fn track(&self, task: JoinHandle<()>) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.retain(|t| !t.is_finished());
            pending.push(task);
        }
    }

    /// Waits for every removal started so far.
    pub async fn drain(&self) {
        loop {
            let batch: Vec<JoinHandle<()>> = match self.pending.lock() {
                Ok(mut pending) => std::mem::take(&mut *pending),
                Err(_) => return,
            };
            if batch.is_empty() {
                return;
            }
            for task in batch {
                let _ = task.await;
            }
        }
    }
}
