//! Record fixtures: trial results built from the record types themselves (not JSON blobs), with
//! fixed timestamps so text rendered from them can be snapshot-tested.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use tasks::records::{
    AgentConfig, AgentInfo, EnvironmentConfig, ExceptionInfo, TaskRef, TrialConfig, TrialResult,
    VerifierConfig, VerifierResult,
};
use tasks::{ExceptionType, Multipliers, TrialOutcome};

/// 2026-01-01T00:00:00Z, the start of every fixture trial.
pub fn epoch() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .expect("a valid date")
}

/// A finished trial of `task` by the `oracle` agent on dataset `ds`, named `trial`, that took
/// ten seconds, with `reward` (as `rewards.reward`) and `exception` (a type name) if given.
/// Its recorded outcome follows from both, as the engine records it.
pub fn trial_result(
    trial: &str,
    task: &str,
    reward: Option<f64>,
    exception: Option<&str>,
) -> TrialResult {
    let started = epoch();
    let config = TrialConfig {
        task: TaskRef {
            name: Some(task.to_owned()),
            source: Some("ds".into()),
            ..TaskRef::default()
        },
        trial_name: trial.to_owned(),
        trials_dir: "jobs/job".into(),
        multipliers: Multipliers::default(),
        agent: AgentConfig {
            name: Some("oracle".into()),
            ..AgentConfig::default()
        },
        environment: EnvironmentConfig::default(),
        verifier: VerifierConfig::default(),
        artifacts: Vec::new(),
        extra_instruction_paths: Vec::new(),
        job_id: "job".into(),
        harbor_026: Default::default(),
        limits: None,
        identity: None,
    };
    let exception_info = exception.map(|name| ExceptionInfo {
        exception_type: ExceptionType::from_name(name),
        exception_message: format!("{name} happened"),
        exception_traceback: String::new(),
        occurred_at: started,
        policy: None,
        policy_override: None,
    });
    let verifier_result = reward.map(|r| VerifierResult {
        rewards: Some(BTreeMap::from([("reward".to_owned(), r)])),
        ..VerifierResult::default()
    });
    let outcome = TrialOutcome::of(
        exception_info.as_ref().map(|e| &e.exception_type),
        reward.is_some(),
    );
    TrialResult {
        id: format!("id-{trial}"),
        task_name: task.to_owned(),
        trial_name: trial.to_owned(),
        trial_uri: format!("file:///jobs/job/{trial}"),
        task_id: serde_json::json!({ "path": format!("/tasks/{task}") }),
        source: Some("ds".into()),
        task_checksum: "c".into(),
        config,
        agent_info: AgentInfo {
            name: "oracle".into(),
            version: "1.0.0".into(),
            model_info: None,
        },
        verifier_result,
        exception_info,
        started_at: Some(started),
        finished_at: Some(started + chrono::Duration::seconds(10)),
        outcome: Some(outcome),
        attempts: Some(1),
        ..TrialResult::default()
    }
}

/// The same trial recorded as its `attempts`-th attempt.
pub fn with_attempts(mut result: TrialResult, attempts: u32) -> TrialResult {
    result.attempts = Some(attempts);
    result
}

/// The full records of a finished job's trials, read back from `<job_dir>/<trial>/result.json`
/// in the order of `kept` (the job outcome's results, which keep only totals in memory).
pub fn on_disk(
    job_dir: &std::path::Path,
    kept: &[tasks::records::TrialTotals],
) -> Vec<TrialResult> {
    kept.iter()
        .map(|result| {
            let path = job_dir.join(&result.trial_name).join("result.json");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

/// The entries of the `manifest.json` in `artifacts_dir` (a trial's or a step's `artifacts/`),
/// each as `[source, destination, type, status]`, in the manifest's order: one row per
/// artifact, to compare with a literal table.
pub fn artifact_manifest(artifacts_dir: &std::path::Path) -> Vec<[String; 4]> {
    let path = artifacts_dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let entries: Vec<engine::ManifestEntry> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    entries
        .into_iter()
        .map(|e| [e.source, e.destination, e.kind, e.status])
        .collect()
}
