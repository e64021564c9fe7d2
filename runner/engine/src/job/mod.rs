//! A job: plan it (or resume it), schedule its trials with bounded concurrency in plan order,
//! retry infrastructure errors, record the job directory as trials finish, and report progress
//! as events.

mod attempts;
mod identity;
pub mod llm;
mod log;
pub mod merge;
mod plan;
mod prefetch;
pub mod record_manifest;
mod recorder;
pub mod resume;
mod retry_policy;
mod shard;
mod stats;
mod trial_attempts;

pub use attempts::{ATTEMPTS_DIR, kept_attempts};
pub use identity::{AgentFingerprint, json_differences};
pub use log::{JOB_LOG, JobLog};
pub use plan::{JobPlan, JobSettings, PlannedTrial, plan_job};
pub use recorder::{JobRecorder, coverage};
pub use retry_policy::RetryPolicy;
pub use shard::{Shard, ShardError, TaskWeight, assign, select_shard};
pub use stats::{job_stats, reward_label};

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use adapter::AnyAgent;
use tasks::records::{Coverage, TrialTotals};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::context::JobContext;
use crate::events::{Event, EventSender, TimedEvent};
use crate::image_cache::image_cache;
use crate::pause::PauseMonitor;

/// How a job ended.
#[derive(Debug)]
pub struct JobOutcome {
    /// Every finished trial's totals (the records are on disk): those a resume found
    /// complete, then this run's in the order they finished.
    pub results: Vec<TrialTotals>,
    /// Trials planned (run now or earlier).
    pub planned: usize,
    /// Planned trials by outcome, and the share scored.
    pub coverage: Coverage,
    /// The user interrupted the job.
    pub interrupted: bool,
    /// The median time per trial the runner itself spent (the trial's wall time, its
    /// attempts' together, minus the time inside the agent's and verifier's commands: what
    /// each attempt's `overhead:` line of trial.log says), over the trials that ran. The median,
    /// as `bench/nop-trial.sh` gives it, so that one slow trial does not stand for the rest.
    pub median_overhead: Option<Duration>,
    /// Objects the end-of-job sweep removed (left by cancelled starts).
    pub swept: usize,
    /// The LLM bridge's totals and budget stop, when the job had a bridge.
    pub llm: Option<tasks::records::JobLlmUsage>,
}

impl JobOutcome {
    /// Finished trials without a reward.
    pub fn unscored(&self) -> usize {
        self.results.iter().filter(|r| r.reward().is_none()).count()
    }

    /// Planned trials without a usable result: infrastructure errors after retries, and
    /// trials that never ran or finished.
    pub fn missing(&self) -> u32 {
        self.coverage.infra_error + self.coverage.not_run
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

/// Runs a planned (or resumed) job to the end (or until `cancel`), writing the job directory
/// and passing every event to `on_event` (the reporter).
pub async fn run_job<B: Backend>(
    backend: B,
    agent: AnyAgent,
    plan: JobPlan,
    job_dir: PathBuf,
    settings: &JobSettings,
    cancel: CancellationToken,
    mut on_event: impl FnMut(&TimedEvent),
) -> Result<JobOutcome, JobError> {
    let io = |source| JobError {
        dir: job_dir.clone(),
        source,
    };
    std::fs::create_dir_all(&job_dir).map_err(io)?;
    let log = JobLog::open(&job_dir);
    log_start(&log, &plan, settings);
    tasks::atomic::write_json_atomic(&job_dir.join("config.json"), &plan.config).map_err(io)?;
    let planned = plan.planned;
    let tasks = plan.tasks();
    let mut recorder = JobRecorder::new(
        job_dir.clone(),
        &plan.job_id,
        planned as u32,
        plan.lock,
        plan.started_at,
        plan.done,
        log.clone(),
    );
    recorder.set_shard(plan.config.shard, plan.config.n_shards);
    recorder.write_lock().map_err(io)?;
    recorder.write_initial().map_err(io)?;
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let events = EventSender::new(sender);
    let pauses = PauseMonitor::new();
    let ctx = Arc::new(JobContext {
        backend,
        agent,
        job_id: plan.job_id.clone(),
        job_dir: job_dir.clone(),
        multipliers: settings.multipliers,
        force_build: settings.force_build,
        limits: settings.limits.clone(),
        images: image_cache(tasks.iter().map(|t| t.as_ref())),
        events: events.clone(),
        cancel: cancel.clone(),
        pauses: pauses.clone(),
        watchdog_grace: settings.watchdog_grace,
        bridge: settings.bridge.clone(),
    });
    if plan.resumed {
        remove_leftovers(&ctx, &log).await;
    }
    let ticker_stop = CancellationToken::new();
    let ticker = {
        let events = events.clone();
        tokio::spawn(pauses.run(ticker_stop.clone(), move |pause| {
            let _ = events.send(Event::Paused {
                seconds: pause.seconds,
            });
        }))
    };
    // The scheduler owns the only handle on the context, so when it and its trials are done
    // every event sender is gone and the collecting loop below ends.
    let scheduler = async {
        let ended = schedule(ctx, plan.trials, tasks, settings, &cancel).await;
        ticker_stop.cancel();
        ended
    };
    drop(events);
    let collect = collect_events(&mut receiver, &mut recorder, &mut on_event);
    let (ended, record_failure) = tokio::join!(scheduler, collect);
    if !ended.engine_images.is_empty() {
        recorder
            .record_engine_images(ended.engine_images)
            .map_err(io)?;
    }
    let _ = ticker.await;
    if let Some(usage) = &ended.llm {
        log.line(&llm::usage_line(usage));
        if let Some(stop) = llm::budget_stop_sentence(usage) {
            log.line(&stop);
        }
        recorder.set_llm_usage(usage.clone());
    }
    recorder.finish().map_err(io)?;
    let coverage = recorder.coverage();
    log_end(&log, &coverage, cancel.is_cancelled(), ended.swept);
    if let Some(e) = record_failure {
        log.line(&format!("error: {}", io(e)));
        return Err(JobError {
            dir: job_dir.clone(),
            source: std::io::Error::other("a record could not be written; see job.log"),
        });
    }
    Ok(JobOutcome {
        results: recorder.into_finished(),
        planned,
        coverage,
        interrupted: cancel.is_cancelled(),
        median_overhead: median(ended.overheads),
        swept: ended.swept,
        llm: ended.llm,
    })
}

/// Removes whatever a killed run of this job left (its trials keep their names, so a leftover
/// container would block the re-run's start): this process holds the job now, so nothing of
/// it can still be in use.
async fn remove_leftovers<B: Backend>(ctx: &JobContext<B>, log: &JobLog) {
    match ctx.backend.remove_job(&ctx.job_id).await {
        Ok(0) => {}
        Ok(n) => log.line(&format!(
            "removed {n} container(s) an earlier run of this job left behind"
        )),
        Err(e) => log.line(&format!(
            "warning: could not remove what an earlier run of this job left: {e}"
        )),
    }
}

/// What the scheduler learnt by the time its last trial ended.
struct Scheduled {
    /// Each finished trial's overhead.
    overheads: Vec<Duration>,
    /// Objects the end-of-job sweep removed.
    swept: usize,
    /// The LLM bridge's totals and budget stop.
    llm: Option<tasks::records::JobLlmUsage>,
    /// The images each engine of the pool ran, for lock.json (`Backend::images_by_engine`).
    engine_images: Vec<(String, String, String)>,
}

/// Starts `trials` in plan order, at most `n_concurrent` at once, each through its retries,
/// while the prebuilt images of later `tasks` are pulled; stops starting trials on `cancel`
/// or a spent LLM budget; waits for the started ones, then sweeps what is left of the job.
async fn schedule<B: Backend>(
    ctx: Arc<JobContext<B>>,
    trials: Vec<PlannedTrial>,
    tasks: Vec<Arc<tasks::Task>>,
    settings: &JobSettings,
    cancel: &CancellationToken,
) -> Scheduled {
    let semaphore = Arc::new(Semaphore::new(settings.n_concurrent.max(1) as usize));
    let policy = Arc::new(settings.retry.clone());
    let mut running = JoinSet::new();
    let mut overheads = Vec::new();
    // Pulls later tasks' prebuilt images while early trials run; aborted when dropped.
    let _prefetch = prefetch::prefetch_images(&ctx, &tasks);
    drop(tasks);
    let mut budget_stop = None;
    let mut not_started = trials.len() as u32;
    for trial in trials {
        // Acquired before spawning, so trials start in plan order (attempt by attempt,
        // as in Harbor), not in the order the runtime polls them.
        let permit = tokio::select! {
            permit = semaphore.clone().acquire_owned() => permit.expect("never closed"),
            _ = cancel.cancelled() => break,
        };
        // A spent job budget starts nothing more: the rest stay not run, never 0.
        budget_stop = llm::budget_stop(ctx.bridge.as_ref());
        if budget_stop.is_some() {
            break;
        }
        not_started -= 1;
        // Finished trials are reaped as the job goes: a finished task keeps its (large)
        // future's allocation until joined, which made memory grow by ~10 KB per trial until
        // the last one was spawned.
        while let Some(joined) = running.try_join_next() {
            if let Ok(overhead) = joined {
                overheads.push(overhead);
            }
        }
        let ctx = ctx.clone();
        let policy = policy.clone();
        // The whole plan is made as the trial starts (see `PlannedTrial`).
        let trial = trial.to_plan(&ctx.job_id);
        running.spawn(async move {
            trial_attempts::run_with_retries(ctx, trial, &policy, permit).await
        });
    }
    while let Some(joined) = running.join_next().await {
        if let Ok(overhead) = joined {
            overheads.push(overhead);
        }
    }
    // Backstop: anything a cancelled start left behind goes now, not at the next run.
    let swept = ctx.backend.remove_job(&ctx.job_id).await.unwrap_or(0);
    let engine_images = ctx.backend.images_by_engine();
    let llm = ctx.bridge.as_ref().map(|bridge| {
        let not_run = if budget_stop.is_some() {
            not_started
        } else {
            0
        };
        llm::job_usage(bridge, budget_stop, not_run)
    });
    Scheduled {
        overheads,
        swept,
        llm,
        engine_images,
    }
}

/// Passes every event to `on_event` and the recorder until every sender is gone, flushing the
/// recorder's pending result.json on a tick; the first record that could not be written.
async fn collect_events(
    receiver: &mut mpsc::UnboundedReceiver<TimedEvent>,
    recorder: &mut JobRecorder,
    on_event: &mut impl FnMut(&TimedEvent),
) -> Option<std::io::Error> {
    let mut failure = None;
    let mut tick = tokio::time::interval(recorder::RESULT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let recorded = tokio::select! {
            event = receiver.recv() => match event {
                Some(event) => {
                    on_event(&event);
                    recorder.record(&event)
                }
                None => break,
            },
            _ = tick.tick() => recorder.flush(),
        };
        if let Err(e) = recorded
            && failure.is_none()
        {
            failure = Some(e);
        }
    }
    failure
}

/// The job log's last line before its summary: how the job ended and its coverage.
fn log_end(log: &JobLog, coverage: &Coverage, interrupted: bool, swept: usize) {
    log.line(&format!(
        "job {}: {} of {} planned trials scored, {} agent errors, {} infra errors, {} not run{}",
        if interrupted {
            "interrupted"
        } else {
            "finished"
        },
        coverage.scored,
        coverage.planned,
        coverage.agent_error,
        coverage.infra_error,
        coverage.not_run,
        if swept > 0 {
            format!("; swept {swept} leftover container(s)")
        } else {
            String::new()
        }
    ));
}

/// The job log's first lines: what runs, how, and (on a resume) what was already there.
fn log_start(log: &JobLog, plan: &JobPlan, settings: &JobSettings) {
    let config = &plan.config;
    let verb = if plan.started_at.is_some() {
        "resumed"
    } else {
        "started"
    };
    log.line(&format!(
        "job {} {verb}: {} (runner {})",
        plan.job_id,
        config.job_name,
        tasks::RUNNER_VERSION
    ));
    let agent = &config.agents[0];
    log.line(&format!(
        "agent {} (model {}), dataset {}, k={}, {} at once",
        agent.name.as_deref().unwrap_or("?"),
        agent.model_name.as_deref().unwrap_or("none"),
        config.datasets[0].path.as_deref().unwrap_or("?"),
        config.n_attempts,
        config.n_concurrent_trials,
    ));
    if let (Some(shard), Some(n)) = (config.shard, config.n_shards) {
        log.line(&format!(
            "shard {shard}/{n} of the plan: {} trial(s) of {} task(s)",
            plan.planned,
            plan.lock
                .trials
                .iter()
                .map(|t| t.task.name.as_str())
                .collect::<HashSet<_>>()
                .len()
        ));
    }
    let retry = &settings.retry;
    log.line(&format!(
        "retries: up to {} per trial, of {}; never {}; backoff {:.0}s×{}^n up to {:.0}s with jitter",
        retry.max_retries,
        match &retry.include {
            Some(kinds) => kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            None => "infrastructure errors".into(),
        },
        retry
            .exclude
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        retry.min_wait.as_secs_f64(),
        retry.multiplier,
        retry.max_wait.as_secs_f64()
    ));
    let m = &config.multipliers;
    let factor = |f: Option<f64>| f.map_or_else(|| "global".to_owned(), |f| f.to_string());
    log.line(&format!(
        "timeout multiplier {} (agent {}, verifier {}, agent setup {}, environment build {}); watchdog grace {:.0}s; force build {}",
        m.timeout_multiplier,
        factor(m.agent_timeout_multiplier),
        factor(m.verifier_timeout_multiplier),
        factor(m.agent_setup_timeout_multiplier),
        factor(m.environment_build_timeout_multiplier),
        settings.watchdog_grace.as_secs_f64(),
        if settings.force_build { "on" } else { "off" }
    ));
    log.line(&format!(
        "{} trials planned, {} complete already, {} to run",
        plan.planned,
        plan.done.len(),
        plan.trials.len()
    ));
    for skipped in &plan.skipped {
        log.line(&format!("warning: skipped task: {skipped}"));
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
fn median(mut values: Vec<Duration>) -> Option<Duration> {
    values.sort_unstable();
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2),
    }
}

#[cfg(test)]
mod overhead_tests {
    use super::*;

    #[test]
    fn the_overhead_is_the_median_trial_so_one_slow_trial_does_not_stand_for_the_rest() {
        let ms = Duration::from_millis;
        assert_eq!(median(Vec::new()), None);
        assert_eq!(median(vec![ms(400), ms(9000), ms(300)]), Some(ms(400)));
        assert_eq!(
            median(vec![ms(300), ms(500), ms(9000), ms(400)]),
            Some(ms(450))
        );
    }
}
