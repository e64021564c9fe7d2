//! One trial through its attempts: run, and while the attempt ended in a retryable
//! infrastructure error (and retries are left and the job goes on), keep it under
//! `attempts/<n>/`, wait the backoff, and run again. Only the final attempt's record is
//! written as the trial's `result.json` and reported finished.

use std::sync::Arc;
use std::time::Duration;

use tasks::TrialOutcome;
use tokio::sync::OwnedSemaphorePermit;

use super::attempts::{ATTEMPTS_DIR, retire};
use super::retry_policy::{RetryPolicy, jitter};
use crate::backend::Backend;
use crate::context::JobContext;
use crate::events::Event;
use crate::trial::{TrialPlan, run_trial, write_result};

/// Runs `plan` until an attempt is final; returns the runner's overhead over all attempts.
/// `slot` is the trial's place among the job's concurrent environments: held through its
/// attempts and backoffs, and given up once the final attempt's environment is gone, before
/// its record is written, so the next trial starts while the record is made durable.
pub(super) async fn run_with_retries<B: Backend>(
    ctx: Arc<JobContext<B>>,
    plan: TrialPlan,
    policy: &RetryPolicy,
    slot: OwnedSemaphorePermit,
) -> Duration {
    let mut attempt = plan.first_attempt.max(1);
    let mut retries = 0;
    let mut overhead = Duration::ZERO;
    let dir = ctx.job_dir.join(plan.name());
    loop {
        let finished = run_trial(ctx.clone(), plan.clone(), attempt).await;
        overhead += finished.wall.saturating_sub(finished.in_container);
        let result = finished.result;
        let kind = result.exception_info.as_ref().map(|e| &e.exception_type);
        let retryable = result.outcome() == TrialOutcome::InfraError
            && kind.is_some_and(|k| policy.should_retry(k))
            && retries < policy.max_retries
            && !ctx.cancel.is_cancelled();
        if retryable {
            // The attempt is moved aside before its record is written there, so a crash in
            // between leaves a trial without result.json (re-run on resume), never a failed
            // attempt that looks final.
            match retire(&ctx.job_dir, plan.name()) {
                Ok(n) => {
                    let kept = dir.join(ATTEMPTS_DIR).join(n.to_string());
                    if let Err(e) = write_result(&kept, &result) {
                        ctx.emit(Event::Warning(format!(
                            "{}: cannot write the record of attempt {n} in {}: {e}",
                            plan.name(),
                            kept.display()
                        )));
                    }
                    retries += 1;
                    let delay = policy.backoff(retries, jitter());
                    let exception = result
                        .exception_info
                        .as_ref()
                        .expect("a retryable attempt has an exception");
                    ctx.emit(Event::TrialRetrying {
                        trial: plan.name().to_owned(),
                        attempt,
                        exception: exception.exception_type.clone(),
                        message: exception.exception_message.clone(),
                        delay,
                    });
                    // A start may have failed because the image went away: look again.
                    ctx.images.forget_finished(&plan.task.name);
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        // Interrupted while waiting: the trial stays without result.json and
                        // a resume runs it.
                        _ = ctx.cancel.cancelled() => return overhead,
                    }
                    attempt += 1;
                    continue;
                }
                Err(e) => ctx.emit(Event::Warning(format!(
                    "{}: cannot keep attempt {attempt} aside for a retry ({e}); its result is final",
                    plan.name()
                ))),
            }
        }
        drop(slot);
        match write_result(&dir, &result) {
            Ok(()) => ctx.emit(Event::TrialFinished(Box::new(result))),
            Err(e) => ctx.emit(Event::Warning(format!(
                "{}: cannot write result.json: {e}; the trial counts as not run and a resume runs it again",
                plan.name()
            ))),
        }
        return overhead;
    }
}
