//! A trial's result record: the initial record, its exception and its phase timings.

use std::path::Path;

use adapter::{Agent, AnyAgent};
use chrono::Utc;
use tasks::records::{AgentInfo, ExceptionInfo, ModelInfo, PhaseTiming, TrialResult};
use tasks::{ExceptionType, TaskId};

use super::TrialPlan;
use crate::failure::TrialFailure;

/// The record of a trial that is about to start.
pub(super) fn new_result(agent: &AnyAgent, plan: &TrialPlan, trial_dir: &Path) -> TrialResult {
    TrialResult {
        id: uuid::Uuid::new_v4().to_string(),
        task_name: plan.task.name.clone(),
        trial_name: plan.config.trial_name.clone(),
        trial_uri: format!("file://{}", trial_dir.display()),
        task_id: TaskId::of(&plan.task).to_json(),
        source: plan.config.task.source.clone(),
        task_checksum: plan.task.digest_hex().to_owned(),
        config: plan.config.clone(),
        agent_info: AgentInfo {
            name: agent.name().to_owned(),
            version: agent.version(),
            model_info: agent.model_name().map(|m| ModelInfo::from_model_name(&m)),
        },
        agent_result: None,
        verifier_result: None,
        exception_info: None,
        started_at: Some(Utc::now()),
        finished_at: None,
        environment_setup: None,
        agent_setup: None,
        agent_execution: None,
        verifier: None,
        step_results: None,
        agent_leftover_processes: Vec::new(),
        verifier_isolation: None,
        truncated_outputs: Vec::new(),
    }
}

/// Records `failure` in `exception_info` and `exception.txt`, with what it learnt. Harbor
/// keeps the first exception; a cancellation replaces an earlier one, because a trial that was
/// interrupted has no trustworthy outcome whatever happened before.
pub(super) fn record_failure(result: &mut TrialResult, trial_dir: &Path, failure: TrialFailure) {
    if failure.partial.is_some() && result.verifier_result.is_none() {
        result.verifier_result = failure.partial.as_deref().cloned();
    }
    if failure.agent_context.is_some() && result.agent_result.is_none() {
        result.agent_result = failure.agent_context.as_deref().cloned();
    }
    let replaces = failure.kind == ExceptionType::CancelledError;
    if result.exception_info.is_some() && !replaces {
        return;
    }
    let trace = format!("{}: {}\n", failure.kind, failure.message);
    let _ = tasks::atomic::write_atomic(&trial_dir.join("exception.txt"), trace.as_bytes());
    result.exception_info = Some(ExceptionInfo {
        exception_type: failure.kind,
        exception_message: failure.message,
        exception_traceback: trace,
        occurred_at: Utc::now(),
    });
}

/// Marks every phase that started and never finished (the trial was interrupted or failed in
/// it) as finished now, so its timing shows how long it ran.
pub(super) fn close_open_timings(result: &mut TrialResult) {
    for timing in [
        &mut result.environment_setup,
        &mut result.agent_setup,
        &mut result.agent_execution,
        &mut result.verifier,
    ]
    .into_iter()
    .flatten()
    {
        if timing.finished_at.is_none() {
            timing.finish();
        }
    }
}

/// Starts a phase's timing in `slot`.
pub(super) fn start_timing(slot: &mut Option<PhaseTiming>) {
    *slot = Some(PhaseTiming::start());
}

/// Ends the phase timing in `slot`.
pub(super) fn finish_timing(slot: &mut Option<PhaseTiming>) {
    if let Some(timing) = slot {
        timing.finish();
    }
}
