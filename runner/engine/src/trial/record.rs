//! A trial's result record: the initial record, its exception, its phase timings, and what a
//! pause of the runner means for it; and its lock entry (`lock_entry`).

use std::path::Path;

use adapter::{Agent, AnyAgent};
use chrono::Utc;
use tasks::records::{
    AgentInfo, ExceptionInfo, LockTask, LockTrial, ModelInfo, PhaseTiming, TrialConfig, TrialResult,
};
use tasks::{ExceptionFamily, ExceptionType, Task, TaskId};

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
        task_checksum: plan.task.checksum.clone(),
        // Set as the trial starts, as Harbor 0.26 sets it: a trial that never reaches its
        // verification still says where it would have run.
        verifier_environment_mode: super::trial_verifier_mode(&plan.task).map(str::to_owned),
        config: plan.config.clone(),
        agent_info: AgentInfo {
            name: agent.name().to_owned(),
            version: agent.version(),
            // The model the job recorded (`-m` overrides the agent config's), so agent_info
            // matches the job's agents[] entry.
            model_info: (plan.config.agent.model_name.clone())
                .or_else(|| agent.model_name())
                .map(|m| ModelInfo::from_model_name(&m)),
        },
        started_at: Some(Utc::now()),
        ..TrialResult::default()
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
        policy: None,
        policy_override: None,
    });
}

/// When the runner was paused while the trial ran (`result.pauses` is filled) and the trial
/// ended in a timeout, the timeout measured the pause, not the agent: the exception becomes
/// `RunnerPausedError` (an infrastructure error) naming the pause and the original exception.
/// Returns true when it changed the record.
pub(super) fn reclassify_for_pauses(result: &mut TrialResult, trial_dir: &Path) -> bool {
    if result.pauses.is_empty() {
        return false;
    }
    let Some(info) = &mut result.exception_info else {
        return false;
    };
    if !info
        .exception_type
        .families()
        .contains(&ExceptionFamily::Timeout)
    {
        return false;
    }
    let paused: f64 = result.pauses.iter().map(|p| p.seconds).sum();
    info.exception_message = format!(
        "the runner was paused for {paused:.1}s while this trial ran (SIGSTOP or a suspended machine), so its          {} says nothing about the agent: {}",
        info.exception_type, info.exception_message
    );
    info.exception_type = ExceptionType::RunnerPausedError;
    info.exception_traceback = format!("{}: {}\n", info.exception_type, info.exception_message);
    let _ = tasks::atomic::write_atomic(
        &trial_dir.join("exception.txt"),
        info.exception_traceback.as_bytes(),
    );
    true
}

/// `scored (reward 1.0)`, `agent_error (AgentSetupError: …)`, `infra_error (…)` for logs.
pub fn describe_outcome(result: &TrialResult) -> String {
    let mut parts = Vec::new();
    if let Some(reward) = result.reward() {
        parts.push(format!("reward {reward}"));
    }
    if let Some(e) = &result.exception_info {
        parts.push(e.headline());
    }
    if parts.is_empty() {
        result.outcome().to_string()
    } else {
        format!("{} ({})", result.outcome(), parts.join("; "))
    }
}

/// Harbor 0.26's backfill: an agent result that does not say which models spent its tokens
/// gets `model_usage` summed from the agent's trajectory (the trial's `agent/trajectory.json`,
/// each step's `steps/<name>/agent/trajectory.json`). A missing or unreadable trajectory, or
/// one with no attributable step, leaves it `null`, as in Harbor.
pub(super) fn backfill_model_usage(result: &mut TrialResult, trial_dir: &Path) {
    fill_from(result.agent_result.as_mut(), &trial_dir.join("agent"));
    for step in result.step_results.iter_mut().flatten() {
        let dir = trial_dir.join("steps").join(&step.step_name).join("agent");
        fill_from(step.agent_result.as_mut(), &dir);
    }
}

fn fill_from(context: Option<&mut tasks::records::AgentContext>, agent_dir: &Path) {
    let Some(context) = context.filter(|c| c.model_usage.is_none()) else {
        return;
    };
    let path = agent_dir.join("trajectory.json");
    let bytes =
        tasks::bounded::read_capped(&path, tasks::bounded::MAX_TRAJECTORY_BYTES, "trajectory");
    let Some(trajectory) = bytes.ok().and_then(|b| serde_json::from_slice(&b).ok()) else {
        return;
    };
    let usage = tasks::atif::model_usage(&trajectory);
    context.model_usage = (!usage.is_empty()).then_some(usage);
}

/// Marks every phase that started and never finished (the trial was interrupted or failed in
/// it) as finished now, so its timing shows how long it ran.
pub(super) fn close_open_timings(result: &mut TrialResult) {
    let steps = result.step_results.iter_mut().flatten();
    let step_timings = steps.flat_map(|s| [&mut s.agent_execution, &mut s.verifier]);
    for timing in [
        &mut result.environment_setup,
        &mut result.agent_setup,
        &mut result.agent_execution,
        &mut result.verifier,
    ]
    .into_iter()
    .chain(step_timings)
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

/// The lock entry of a trial of `task` with `config` (Harbor 0.26's `TrialLock`, plus the
/// trial's name): the job's lock.json holds one per trial, and each trial writes its own as
/// `<trial>/lock.json`, as 0.26 does.
pub fn lock_entry(task: &Task, config: &TrialConfig) -> LockTrial {
    let mut lock_task = LockTask {
        name: task.name.clone(),
        version: task.config.task.as_ref().and_then(|t| t.version.clone()),
        kind: "local".into(),
        digest: task.digest.clone(),
        source: config.task.source.clone(),
        path: Some(task.dir.display().to_string()),
        ..LockTask::default()
    };
    if let Some(origin) = &task.origin {
        origin.lock_into(&mut lock_task);
    }
    LockTrial::new(config, lock_task, super::trial_verifier_mode(task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tasks::TrialOutcome;
    use tasks::records::PauseRecord;
    use testkit::records::trial_result;

    fn paused(mut result: TrialResult) -> TrialResult {
        result.pauses = vec![PauseRecord {
            detected_at: testkit::records::epoch(),
            seconds: 42.0,
        }];
        result.outcome = None;
        result
    }

    #[test]
    fn a_timeout_during_a_pause_becomes_an_infrastructure_error_naming_the_pause() {
        let dir = tempfile::tempdir().unwrap();
        let mut result = paused(trial_result("t", "a", Some(0.0), Some("AgentTimeoutError")));
        assert!(reclassify_for_pauses(&mut result, dir.path()));
        let info = result.exception_info.as_ref().unwrap();
        assert_eq!(info.exception_type, ExceptionType::RunnerPausedError);
        assert!(info.exception_message.contains("paused for 42.0s"));
        assert!(info.exception_message.contains("AgentTimeoutError"));
        assert_eq!(result.outcome(), TrialOutcome::InfraError);
        let trace = std::fs::read_to_string(dir.path().join("exception.txt")).unwrap();
        assert!(trace.starts_with("RunnerPausedError: "), "{trace}");
    }

    #[test]
    fn a_pause_leaves_other_outcomes_alone_but_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        for (reward, exception) in [(Some(1.0), None), (None, Some("AgentSetupError"))] {
            let mut result = paused(trial_result("t", "a", reward, exception));
            let before = result.exception_info.clone();
            assert!(!reclassify_for_pauses(&mut result, dir.path()));
            assert_eq!(result.exception_info, before);
            assert_eq!(result.pauses.len(), 1);
        }
        let mut unpaused = trial_result("t", "a", None, Some("AgentTimeoutError"));
        assert!(!reclassify_for_pauses(&mut unpaused, dir.path()));
    }

    #[test]
    fn model_usage_is_backfilled_from_the_trajectory_only_when_the_agent_left_it_unsaid() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agent")).unwrap();
        let trajectory = serde_json::json!({
            "agent": {"name": "a", "version": "1", "model_name": "m"},
            "steps": [{"step_id": 1, "source": "agent", "message": "x",
                       "metrics": {"prompt_tokens": 3, "completion_tokens": 2, "cost_usd": 0.5}}]
        });
        std::fs::write(
            dir.path().join("agent/trajectory.json"),
            trajectory.to_string(),
        )
        .unwrap();
        let mut result = trial_result("t", "a", Some(1.0), None);
        backfill_model_usage(&mut result, dir.path());
        assert_eq!(
            result.agent_result, None,
            "no agent result: nothing to backfill"
        );
        result.agent_result = Some(Default::default());
        backfill_model_usage(&mut result, dir.path());
        let usage = result
            .agent_result
            .as_ref()
            .unwrap()
            .model_usage
            .clone()
            .unwrap();
        assert_eq!(
            (usage["m"].n_input_tokens, usage["m"].cost_usd),
            (3, Some(0.5))
        );
        let said = std::collections::BTreeMap::from([("own".to_owned(), Default::default())]);
        result.agent_result.as_mut().unwrap().model_usage = Some(said.clone());
        backfill_model_usage(&mut result, dir.path());
        assert_eq!(result.agent_result.unwrap().model_usage, Some(said));
    }
}
