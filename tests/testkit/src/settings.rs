//! The job settings the engine's tests start from, so each test states only what it changes.

use std::path::Path;
use std::time::Duration;

use adapter::AnyAgent;
use engine::job::{AgentFingerprint, JobSettings, RetryPolicy};
use tasks::Multipliers;

/// Settings of a job named `job_name` under `<dir>/jobs` running `agent` `k` times per task,
/// one trial at a time, without retries, a bridge or container secrets; a test changes the
/// fields it is about.
pub fn job_settings(dir: &Path, job_name: &str, agent: &AnyAgent, k: u32) -> JobSettings {
    JobSettings {
        job_name: job_name.into(),
        jobs_dir: dir.join("jobs").display().to_string(),
        k,
        n_concurrent: 1,
        multipliers: Multipliers::default(),
        force_build: false,
        agent: adapter::Agent::job_config(agent),
        agent_fingerprint: AgentFingerprint::of(agent),
        retry: RetryPolicy::none(),
        override_error_policy: Default::default(),
        watchdog_grace: Duration::from_secs(60),
        allow_container_secrets: false,
        instruction_suffix: None,
        invocation: vec!["test".into()],
        working_dir: None,
        runner_commit: None,
        limits: engine::LimitSettings::default(),
        bridge: None,
        agent_toolchain: false,
    }
}
