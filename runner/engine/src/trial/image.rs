//! The task image, prepared once per task per job and shared by all its trials.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tasks::{ExceptionType, Task};
use tokio::sync::OnceCell;

use super::JobContext;
use crate::backend::{Backend, IMAGE_PROGRESS_STREAM, ImageInfo, ImageOrigin, OutputSink};
use crate::events::Event;
use crate::failure::TrialFailure;

type ImageCell = Arc<OnceCell<Result<ImageInfo, TrialFailure>>>;

/// Images of a job by task name; the first trial of a task prepares the image, later ones
/// wait for the same result (including the same failure). A retry forgets a finished result,
/// so the image is prepared again (a reused image is only looked up).
#[derive(Default)]
pub struct ImageCache {
    cells: HashMap<String, Mutex<ImageCell>>,
}

impl ImageCache {
    fn cell(&self, task: &str) -> Option<ImageCell> {
        let slot = self.cells.get(task)?;
        Some(slot.lock().expect("not poisoned").clone())
    }

    /// Forgets the image of `task` if its preparation has finished (well or not), so the next
    /// trial prepares it again; one still in progress is kept and waited for.
    pub fn forget_finished(&self, task: &str) {
        if let Some(slot) = self.cells.get(task) {
            let mut cell = slot.lock().expect("not poisoned");
            if cell.initialized() {
                *cell = Arc::new(OnceCell::new());
            }
        }
    }
}

/// One empty cell per task of `tasks`.
pub fn image_cache<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> ImageCache {
    ImageCache {
        cells: tasks
            .into_iter()
            .map(|task| (task.name.clone(), Mutex::new(Arc::new(OnceCell::new()))))
            .collect(),
    }
}

/// The image of `task`, prepared under `deadline` by the first caller (a trial, or the
/// prefetch); build output goes to that caller's `log`, progress lines also to the live view.
/// Every caller logs which image it got.
pub(crate) async fn image_for<B: Backend>(
    ctx: &JobContext<B>,
    task: &Task,
    deadline: Duration,
    log: &OutputSink,
) -> Result<ImageInfo, TrialFailure> {
    let Some(cell) = ctx.images.cell(&task.name) else {
        return Err(TrialFailure::new(
            ExceptionType::RunnerError,
            format!("task {} was not planned with an image", task.name),
        ));
    };
    let outcome = cell
        .get_or_init(|| prepare(ctx, task, deadline, log))
        .await
        .clone();
    match &outcome {
        Ok(info) => log(
            "runner",
            format!(
                "image {} ({}, {}{})\n",
                info.tag,
                info.origin.as_str(),
                info.id,
                info.repo_digests
                    .iter()
                    .map(|d| format!(", {d}"))
                    .collect::<String>()
            )
            .as_bytes(),
        ),
        Err(failure) => log(
            "runner",
            format!("image of task {}: {}\n", task.name, failure.message).as_bytes(),
        ),
    }
    outcome
}

/// Prepares the image once: progress lines become events (the live view), the rest goes to
/// `log`.
async fn prepare<B: Backend>(
    ctx: &JobContext<B>,
    task: &Task,
    deadline: Duration,
    log: &OutputSink,
) -> Result<ImageInfo, TrialFailure> {
    let sink: OutputSink = {
        let log = log.clone();
        let events = ctx.events.clone();
        let task = task.name.clone();
        Arc::new(move |stream, bytes| {
            if stream != IMAGE_PROGRESS_STREAM {
                return log(stream, bytes);
            }
            // Progress is for the live view; trial.log gets the outcome lines instead.
            let text = String::from_utf8_lossy(bytes);
            if let Some(line) = text.lines().rfind(|l| !l.trim().is_empty()) {
                // The receiver is gone only when the job is over.
                let _ = events.send(Event::ImageProgress {
                    task: task.clone(),
                    line: line.trim().to_owned(),
                });
            }
        })
    };
    let started = Instant::now();
    let prepared = tokio::time::timeout(
        deadline,
        ctx.backend.prepare_image(task, ctx.force_build, &sink),
    )
    .await;
    let outcome = match prepared {
        Ok(Ok(info)) => Ok(info),
        Ok(Err(e)) => Err(TrialFailure::from(e)),
        Err(_) => Err(TrialFailure::new(
            ExceptionType::EnvironmentStartTimeoutError,
            format!(
                "preparing the image of task {} (build or pull) timed out after {} seconds",
                task.name,
                deadline.as_secs_f64()
            ),
        )),
    };
    match &outcome {
        Ok(info) => {
            ctx.emit(Event::ImageReady {
                task: task.name.clone(),
                tag: info.tag.clone(),
                id: info.id.clone(),
                built: info.origin == ImageOrigin::Built,
                seconds: started.elapsed().as_secs_f64(),
                image: info.clone(),
            });
        }
        Err(failure) => ctx.emit(Event::ImageFailed {
            task: task.name.clone(),
            message: failure.message.clone(),
        }),
    }
    outcome
}
