//! The prefetch: while early trials run, the prebuilt images of later tasks are pulled, so
//! their first trial finds its image ready.

use std::sync::Arc;

use tasks::Task;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::backend::Backend;
use crate::context::JobContext;
use crate::images::{ImageSource, image_source};
use crate::timeouts::PhaseTimeouts;

/// How many images the prefetch prepares at once: pulls are bound by the network and the
/// registry, and the trials that are already running must keep theirs.
pub const PREFETCH_CONCURRENCY: usize = 2;

/// Starts preparing, in plan order and at most [`PREFETCH_CONCURRENCY`] at a time, the
/// prebuilt images of the planned `tasks`, so later tasks find their image pulled when their
/// first trial starts. Builds are left to the first trial that needs them (so their output
/// lands in that trial's log); a pull's output is copied into the log of each trial of the
/// task. Each image goes through the job's shared image cell, so a
/// trial that asks for an image the prefetch is pulling waits for the same pull, and the pull
/// is bounded by the task's environment deadline as if that trial had started it. The
/// prefetch stops when the job is cancelled; dropping the returned set aborts it.
pub fn prefetch_images<B: Backend>(ctx: &Arc<JobContext<B>>, tasks: &[Arc<Task>]) -> JoinSet<()> {
    let mut seen = std::collections::HashSet::new();
    let tasks: Vec<Arc<Task>> = tasks
        .iter()
        .filter(|t| seen.insert(t.name.clone()))
        .filter(|t| matches!(image_source(t, ctx.force_build), ImageSource::Prebuilt(_)))
        .cloned()
        .collect();
    let mut set = JoinSet::new();
    let slots = Arc::new(Semaphore::new(PREFETCH_CONCURRENCY));
    for task in tasks {
        let ctx = ctx.clone();
        let slots = slots.clone();
        set.spawn(async move {
            let permit = tokio::select! {
                permit = slots.acquire_owned() => permit.expect("never closed"),
                _ = ctx.cancel.cancelled() => return,
            };
            let _permit = permit;
            let deadline = PhaseTimeouts::resolve(&task.config, &ctx.multipliers).environment_build;
            // Progress goes to the live view; the output is kept for the task's trials.
            let images = ctx.image_job();
            tokio::select! {
                _ = images.prefetch(&task, deadline) => {}
                _ = ctx.cancel.cancelled() => {}
            }
        });
    }
    set
}
