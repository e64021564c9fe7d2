//! The task image, prepared once per task per job and shared by all its trials: the job's
//! [`ImageCache`] of one cell per task, and [`ImageJob`], what preparing an image needs of the
//! job (its backend, its events, `--force-build`), so this module needs nothing of the job's
//! or the trial's own types.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tasks::{ExceptionType, Task};
use tokio::sync::OnceCell;

use crate::backend::{Backend, IMAGE_PROGRESS_STREAM, ImageInfo, ImageOrigin, OutputSink};
use crate::events::{Event, EventSender};
use crate::failure::TrialFailure;
use crate::images::ImageRequest;

/// Lines of a preparation's output kept for the trials when no trial watched it (prefetch).
const TRANSCRIPT_LINES: usize = 200;

type ImageCell = Arc<OnceCell<PreparedImage>>;

/// Images of a job by task name; the first caller prepares the image, later ones wait for the
/// same result (including the same failure). A retry forgets a finished result, so the image is
/// prepared again (a reused image is only looked up).
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

/// A preparation's output kept for trials that did not watch it: `(stream, line)` pairs (the
/// last [`TRANSCRIPT_LINES`]) and how many earlier lines were cut.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// The kept lines.
    pub lines: Vec<(String, String)>,
    /// Lines cut before them.
    pub cut: usize,
}

/// A task's image, as prepared.
#[derive(Debug, Clone)]
pub struct PreparedImage {
    /// The image, or why there is none.
    pub outcome: Result<ImageInfo, TrialFailure>,
    /// The preparation's output when the prefetch prepared it (no trial's log has it then).
    pub transcript: Option<Arc<Transcript>>,
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

/// What preparing a task's image needs of the job.
pub struct ImageJob<'a, B: Backend> {
    /// Prepares the images.
    pub backend: &'a B,
    /// The job's images by task.
    pub cache: &'a ImageCache,
    /// Progress, for the live view and the recorder.
    pub events: &'a EventSender,
    /// `--force-build`.
    pub force_build: bool,
}

impl<B: Backend> ImageJob<'_, B> {
    fn emit(&self, event: Event) {
        // The receiver only goes away when the job is over; nothing is lost that matters then.
        let _ = self.events.send(event);
    }

    fn cell_of(&self, task: &Task) -> Result<ImageCell, TrialFailure> {
        self.cache.cell(&task.name).ok_or_else(|| {
            TrialFailure::new(
                ExceptionType::RunnerError,
                format!("task {} was not planned with an image", task.name),
            )
        })
    }

    /// The image of `task`, prepared under `deadline` by the first caller; when that is this
    /// trial, the output goes to its `log`, when it was the prefetch, its transcript is copied
    /// there. Every caller logs which image it got.
    pub async fn image_for(
        &self,
        task: &Task,
        deadline: Duration,
        log: &OutputSink,
    ) -> Result<ImageInfo, TrialFailure> {
        let cell = self.cell_of(task)?;
        let prepared = cell
            .get_or_init(|| async {
                PreparedImage {
                    outcome: self.prepare(task, deadline, log).await,
                    transcript: None,
                }
            })
            .await
            .clone();
        if let Some(transcript) = &prepared.transcript {
            let Transcript { lines, cut } = transcript.as_ref();
            log(
                "runner",
                format!(
                    "image of task {} was prepared ahead of this trial; its output{}:\n",
                    task.name,
                    if *cut > 0 {
                        format!(" (last {} lines)", lines.len())
                    } else {
                        String::new()
                    }
                )
                .as_bytes(),
            );
            for (stream, line) in lines {
                log(stream, format!("{line}\n").as_bytes());
            }
        }
        match &prepared.outcome {
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
        prepared.outcome
    }

    /// Prepares the image of `task` ahead of its trials (the prefetch), keeping its output as a
    /// transcript for them. Nothing happens when a trial already started preparing it.
    pub async fn prefetch(&self, task: &Task, deadline: Duration) {
        let Ok(cell) = self.cell_of(task) else { return };
        cell.get_or_init(|| async {
            let kept = Arc::new(Mutex::new((VecDeque::new(), 0usize)));
            let sink: OutputSink = {
                let kept = kept.clone();
                Arc::new(move |stream, bytes| {
                    let mut kept = kept.lock().expect("not poisoned");
                    for line in String::from_utf8_lossy(bytes).lines() {
                        if kept.0.len() == TRANSCRIPT_LINES {
                            kept.0.pop_front();
                            kept.1 += 1;
                        }
                        kept.0.push_back((stream.to_owned(), line.to_owned()));
                    }
                })
            };
            let outcome = self.prepare(task, deadline, &sink).await;
            let (lines, cut) = std::mem::take(&mut *kept.lock().expect("not poisoned"));
            PreparedImage {
                outcome,
                transcript: Some(Arc::new(Transcript {
                    lines: lines.into(),
                    cut,
                })),
            }
        })
        .await;
    }

    /// Prepares the image once: progress lines become events (the live view), the rest goes to
    /// `log`.
    async fn prepare(
        &self,
        task: &Task,
        deadline: Duration,
        log: &OutputSink,
    ) -> Result<ImageInfo, TrialFailure> {
        let sink: OutputSink = {
            let log = log.clone();
            let events = self.events.clone();
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
            self.backend.prepare_image(
                task,
                &ImageRequest::for_task(task, self.force_build),
                &sink,
            ),
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
                self.emit(Event::ImageReady {
                    task: task.name.clone(),
                    tag: info.tag.clone(),
                    id: info.id.clone(),
                    built: info.origin == ImageOrigin::Built,
                    seconds: started.elapsed().as_secs_f64(),
                    image: info.clone(),
                });
            }
            Err(failure) => self.emit(Event::ImageFailed {
                task: task.name.clone(),
                message: failure.message.clone(),
            }),
        }
        outcome
    }
}
