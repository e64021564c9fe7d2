//! Building a trial's result record: the initial record, the task id and the first failure.

use chrono::Utc;
use tasks::Task;
use tasks::records::{AgentInfo, ExceptionInfo, ModelInfo, TrialResult};

use super::run::{JobShared, TrialPlan};
use adapter::Agent;

/// A phase failure: Harbor's exception type and a message.
pub(super) struct Failure {
    pub(super) exception_type: String,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn new(exception_type: &str, message: impl Into<String>) -> Self {
        Self {
            exception_type: exception_type.to_owned(),
            message: message.into(),
        }
    }
}

pub(super) fn new_result<A: Agent>(
    shared: &JobShared<A>,
    plan: &TrialPlan,
    trial_dir: &std::path::Path,
) -> TrialResult {
    let agent = &shared.agent;
    TrialResult {
        id: uuid::Uuid::new_v4().to_string(),
        task_name: plan.task.name.clone(),
        trial_name: plan.config.trial_name.clone(),
        trial_uri: format!("file://{}", trial_dir.display()),
        task_id: task_id(&plan.task),
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
    }
}

/// Harbor's `PackageTaskId{org, name, ref}` for `org/name` tasks, else `LocalTaskId{path}`.
fn task_id(task: &Task) -> serde_json::Value {
    match task.name.split_once('/') {
        Some((org, name)) => serde_json::json!({ "org": org, "name": name, "ref": task.digest }),
        None => serde_json::json!({ "path": task.dir.display().to_string() }),
    }
}

pub(super) fn record_failure(
    result: &mut TrialResult,
    trial_dir: &std::path::Path,
    failure: Failure,
) {
    if result.exception_info.is_some() {
        return; // Harbor keeps the first exception only.
    }
    let trace = format!("{}: {}\n", failure.exception_type, failure.message);
    let _ = tasks::atomic::write_atomic(&trial_dir.join("exception.txt"), trace.as_bytes());
    result.exception_info = Some(ExceptionInfo {
        exception_type: failure.exception_type,
        exception_message: failure.message,
        exception_traceback: trace,
        occurred_at: Utc::now(),
    });
}
