//! The task image, prepared once per task per job and shared by all its trials.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tasks::{ExceptionType, Task};
use tokio::sync::OnceCell;

use super::JobContext;
use crate::backend::{Backend, ImageInfo, ImageOrigin, OutputSink};
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

/// The image of `task`, prepared under `deadline` by the first trial that asks; build output
/// goes to that trial's log.
pub(super) async fn image_for<B: Backend>(
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
    cell.get_or_init(|| async {
        let started = Instant::now();
        let prepared = tokio::time::timeout(
            deadline,
            ctx.backend.prepare_image(task, ctx.force_build, log),
        )
        .await;
        let outcome = match prepared {
            Ok(Ok(info)) => Ok(info),
            Ok(Err(e)) => Err(TrialFailure::from(e)),
            Err(_) => Err(TrialFailure::new(
                ExceptionType::EnvironmentStartTimeoutError,
                format!(
                    "building the image of task {} timed out after {} seconds",
                    task.name,
                    deadline.as_secs_f64()
                ),
            )),
        };
        if let Ok(info) = &outcome {
            ctx.emit(Event::ImageReady {
                task: task.name.clone(),
                tag: info.tag.clone(),
                id: info.id.clone(),
                built: info.origin == ImageOrigin::Built,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
        outcome
    })
    .await
    .clone()
}
