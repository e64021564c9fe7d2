//! A job: plan it, schedule its trials with bounded concurrency in plan order, record the job
//! directory as trials finish, and report progress as events.

mod plan;
mod recorder;
mod stats;

pub use plan::{JobPlan, JobSettings, plan_job};
pub use recorder::JobRecorder;
pub use stats::{eval_key, job_stats, reward_label};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use adapter::AnyAgent;
use tasks::records::TrialResult;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::events::Event;
use crate::trial::{JobContext, image::image_cache, run_trial};

/// How a job ended.
#[derive(Debug)]
pub struct JobOutcome {
    /// Every finished trial's result, in the order they finished.
    pub results: Vec<TrialResult>,
    /// Trials planned.
    pub planned: usize,
    /// The user interrupted the job.
    pub interrupted: bool,
    /// Mean time per trial the runner itself spent (trial wall time minus time inside
    /// environment commands), over the trials that ran.
    pub mean_overhead: Option<Duration>,
    /// Objects the end-of-job sweep removed (left by cancelled starts).
    pub swept: usize,
}

impl JobOutcome {
    /// Finished trials without a reward.
    pub fn unscored(&self) -> usize {
        self.results.iter().filter(|r| r.reward().is_none()).count()
    }
}

/// Why a job could not be run or recorded (trial failures are not errors: they are recorded).
#[derive(Debug, thiserror::Error)]
#[error("writing the job directory {dir}: {source}")]
pub struct JobError {
    /// The job directory.
    pub dir: PathBuf,
    /// The file system's answer.
    #[source]
    pub source: std::io::Error,
}

/// Runs a planned job to the end (or until `cancel`), writing the job directory and passing
/// every event to `on_event` (the reporter).
pub async fn run_job<B: Backend>(
    backend: B,
    agent: AnyAgent,
    plan: JobPlan,
    job_dir: PathBuf,
    settings: &JobSettings,
    cancel: CancellationToken,
    mut on_event: impl FnMut(&Event),
) -> Result<JobOutcome, JobError> {
    let io = |source| JobError {
        dir: job_dir.clone(),
        source,
    };
    std::fs::create_dir_all(&job_dir).map_err(io)?;
    tasks::atomic::write_json_atomic(&job_dir.join("config.json"), &plan.config).map_err(io)?;
    let planned = plan.trials.len();
    let mut recorder = JobRecorder::new(job_dir.clone(), &plan.job_id, planned as u32, plan.lock);
    recorder.write_lock().map_err(io)?;
    recorder.write_initial().map_err(io)?;
    let (events, mut receiver) = mpsc::unbounded_channel();
    let ctx = Arc::new(JobContext {
        backend,
        agent,
        job_id: plan.job_id.clone(),
        job_dir: job_dir.clone(),
        multipliers: settings.multipliers,
        force_build: settings.force_build,
        limits: settings.limits.clone(),
        images: image_cache(plan.trials.iter().map(|t| t.task.as_ref())),
        events: events.clone(),
        cancel: cancel.clone(),
    });
    // The scheduler owns the only handle on the context, so when it and its trials are done
    // every event sender is gone and the collecting loop below ends.
    let scheduler = {
        let n_concurrent = settings.n_concurrent.max(1) as usize;
        let cancel = cancel.clone();
        async move {
            let semaphore = Arc::new(Semaphore::new(n_concurrent));
            let mut running = JoinSet::new();
            let mut overheads = Vec::new();
            // Pulls later tasks' prebuilt images while early trials run; aborted when dropped.
            let _prefetch = crate::images::prefetch_images(&ctx, &plan.trials);
            for trial in plan.trials {
                // Acquired before spawning, so trials start in plan order (attempt by attempt,
                // as in Harbor), not in the order the runtime polls them.
                let permit = tokio::select! {
                    permit = semaphore.clone().acquire_owned() => permit.expect("never closed"),
                    _ = cancel.cancelled() => break,
                };
                let ctx = ctx.clone();
                running.spawn(async move {
                    let _permit = permit;
                    let outcome = run_trial(ctx.clone(), trial).await;
                    ctx.emit(Event::TrialFinished(Box::new(outcome.result.clone())));
                    outcome.wall.saturating_sub(outcome.in_container)
                });
            }
            while let Some(joined) = running.join_next().await {
                if let Ok(overhead) = joined {
                    overheads.push(overhead);
                }
            }
            // Backstop: anything a cancelled start left behind goes now, not at the next run.
            let swept = ctx.backend.remove_job(&ctx.job_id).await.unwrap_or(0);
            (overheads, swept)
        }
    };
    drop(events);
    let collect = async {
        let mut failure = None;
        while let Some(event) = receiver.recv().await {
            on_event(&event);
            if let Err(e) = recorder.record(&event)
                && failure.is_none()
            {
                failure = Some(e);
            }
        }
        failure
    };
    let ((overheads, swept), record_failure) = tokio::join!(scheduler, collect);
    recorder.finish().map_err(io)?;
    if let Some(e) = record_failure {
        return Err(io(e));
    }
    let mean_overhead = (!overheads.is_empty())
        .then(|| overheads.iter().sum::<Duration>() / overheads.len() as u32);
    Ok(JobOutcome {
        results: recorder.into_finished(),
        planned,
        interrupted: cancel.is_cancelled(),
        mean_overhead,
        swept,
    })
}
