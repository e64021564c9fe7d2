//! A job: plan, schedule trials with bounded concurrency, record, report.

mod plan;
mod recorder;
mod stats;

pub use plan::{JobPlan, JobSettings, plan_job};
pub use recorder::JobRecorder;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use adapter::Agent;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::docker::{DockerClient, Owner, remove_job_containers};
use crate::events::Event;
use crate::report::{Reporter, print_summary};
use crate::trial::run::{JobShared, run_trial};

/// How a job ended.
#[derive(Debug)]
pub struct JobOutcome {
    /// Trials that finished without a reward.
    pub unscored: usize,
    /// The user interrupted the job.
    pub interrupted: bool,
    /// (trial, wall seconds, in-container seconds) for overhead figures.
    pub timings: Vec<(String, f64, f64)>,
}

/// Runs a planned job to the end (or until `cancel`), writing the job directory.
pub async fn run_job<A: Agent + 'static>(
    client: DockerClient,
    agent: Arc<A>,
    plan: JobPlan,
    job_dir: PathBuf,
    settings: &JobSettings,
    cancel: CancellationToken,
) -> std::io::Result<JobOutcome> {
    std::fs::create_dir_all(&job_dir)?;
    tasks::atomic::write_json_atomic(&job_dir.join("config.json"), &plan.config)?;
    let total = plan.trials.len();
    let mut recorder = JobRecorder::new(job_dir.clone(), &plan.job_id, total as u32, plan.lock);
    recorder.write_lock()?;
    recorder.write_initial()?;
    let (events, mut receiver) = mpsc::unbounded_channel();
    let images = plan
        .trials
        .iter()
        .map(|t| (t.task.name.clone(), Arc::new(tokio::sync::OnceCell::new())))
        .collect::<HashMap<_, _>>();
    let shared = Arc::new(JobShared {
        client: client.clone(),
        owner: Owner::current(),
        job_id: plan.job_id.clone(),
        job_dir: job_dir.clone(),
        agent,
        multipliers: settings.multipliers,
        force_build: settings.force_build,
        images,
        events: events.clone(),
        cancel: cancel.clone(),
    });
    let semaphore = Arc::new(Semaphore::new(settings.n_concurrent.max(1) as usize));
    let mut set = JoinSet::new();
    for trial in plan.trials {
        let shared = shared.clone();
        let semaphore = semaphore.clone();
        let events = events.clone();
        let cancel = cancel.clone();
        set.spawn(async move {
            // Acquire in plan order: trials start attempt by attempt, as in Harbor.
            let _permit = semaphore
                .acquire_owned()
                .await
                .expect("semaphore is never closed");
            if cancel.is_cancelled() {
                return None;
            }
            let outcome = run_trial(shared, trial).await;
            let _ = events.send(Event::TrialFinished(Box::new(outcome.result.clone())));
            Some(outcome)
        });
    }
    drop(events);
    drop(shared);

    let mut reporter = Reporter::new(total as u64);
    let mut timings = Vec::new();
    let collect = async {
        while let Some(event) = receiver.recv().await {
            reporter.event(&event);
            let written = match &event {
                Event::TrialStarted { .. } => recorder.trial_started(),
                Event::TrialFinished(result) => recorder.trial_finished((**result).clone()),
                Event::ImageReady { task, tag, id, .. } => recorder.image_ready(task, tag, id),
                Event::Phase { .. } => Ok(()),
            };
            if let Err(e) = written {
                reporter.note(&format!("warning: cannot update the job records: {e}"));
            }
        }
    };
    let join = async {
        while let Some(joined) = set.join_next().await {
            if let Ok(Some(outcome)) = joined {
                timings.push((
                    outcome.result.trial_name.clone(),
                    outcome.wall.as_secs_f64(),
                    outcome.in_container.as_secs_f64(),
                ));
            }
        }
    };
    tokio::join!(collect, join);
    reporter.finish();
    // Backstop: anything a cancelled create left behind goes now, not at the next run.
    if let Ok(n) = remove_job_containers(&client, &plan.job_id).await
        && n > 0
    {
        eprintln!("removed {n} leftover container(s) of this job");
    }
    recorder.finish()?;
    let results = recorder.finished();
    print_summary(results, &job_dir);
    Ok(JobOutcome {
        unscored: results.iter().filter(|r| r.reward().is_none()).count(),
        interrupted: cancel.is_cancelled(),
        timings,
    })
}
