//! Trials for `tasks check`, run by the engine's own job machinery (`plan_job`/`run_job`
//! against the Docker backend), exactly as `runner run` runs them: one small job per
//! (task, agent), in a scratch jobs directory, the records read back from its trial dirs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use docker_backend::DockerBackend;
use engine::job::{AgentFingerprint, JobSettings, RetryPolicy, plan_job, run_job};
use engine::trial::watchdog;
use tasks::records::TrialResult;
use tasks::{Dataset, Multipliers};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::commands::agent::{AgentChoice, choose};
use adapter::Agent;

use crate::exit::CliError;

/// What every check's jobs share: the backend (one image service, so a task's image is
/// built once), where jobs go, and the bound on trials at once.
#[derive(Clone)]
pub struct Runner {
    /// The Docker backend, cloned per job.
    pub backend: DockerBackend,
    /// The scratch jobs directory.
    pub jobs_dir: PathBuf,
    /// One permit per trial running (`--n-concurrent`).
    pub slots: Arc<Semaphore>,
    /// The permits in all.
    pub n_concurrent: u32,
    /// Ctrl-C.
    pub cancel: CancellationToken,
}

/// One finished trial: its record and its directory (for the agent's logs).
pub struct Trial {
    /// `result.json`.
    pub result: TrialResult,
    /// The trial directory.
    pub dir: PathBuf,
}

impl Runner {
    /// Runs `k` trials of the task at `task_dir` with the built-in agent `agent` (`oracle`
    /// or `nop`) as the job `job_name`, and returns their records. A job that cannot run
    /// (the task does not load, the engine refuses) is an error naming the job.
    pub async fn trials(
        &self,
        task_dir: &Path,
        agent: &str,
        k: u32,
        job_name: &str,
    ) -> Result<Vec<Trial>, CliError> {
        let dataset = Dataset::load(task_dir).map_err(CliError::bad_input)?;
        let agent = choose(&AgentChoice {
            name: Some(agent),
            config: None,
            agent_env: &[],
            agent_kwargs: &[],
            tell_deadline: false,
            model: None,
            allow_container_secrets: false,
            require_clean_source: false,
        })?;
        let settings = JobSettings {
            job_name: job_name.to_owned(),
            jobs_dir: self.jobs_dir.display().to_string(),
            k,
            n_concurrent: k.min(self.n_concurrent),
            multipliers: Multipliers::default(),
            force_build: false,
            agent: agent.job_config(),
            agent_fingerprint: AgentFingerprint::of(&agent),
            // A check judges the task: a retried infrastructure error would hide nothing the
            // report needs, but a flaky task must not be retried into passing.
            retry: RetryPolicy::new(0, &[], None).map_err(CliError::runner)?,
            override_error_policy: Default::default(),
            watchdog_grace: watchdog::DEFAULT_GRACE,
            allow_container_secrets: false,
            instruction_suffix: None,
            invocation: vec!["runner".into(), "tasks".into(), "check".into()],
            working_dir: None,
            runner_commit: None,
            limits: engine::LimitSettings::default(),
            bridge: None,
            // The check judges the task with the image's own programs, as a run does.
            agent_toolchain: false,
        };
        let plan = plan_job(&dataset, &settings);
        if let Some(skipped) = plan.skipped.first() {
            return Err(CliError::bad_input(skipped.to_string()));
        }
        let job_dir = self.jobs_dir.join(job_name);
        let _permits = self
            .slots
            .clone()
            .acquire_many_owned(k.min(self.n_concurrent))
            .await
            .map_err(CliError::runner)?;
        let outcome = run_job(
            self.backend.clone(),
            agent,
            plan,
            job_dir.clone(),
            &settings,
            self.cancel.clone(),
            |_| {},
        )
        .await
        .map_err(CliError::runner)?;
        let mut trials = Vec::new();
        for totals in &outcome.results {
            let dir = job_dir.join(&totals.trial_name);
            let path = dir.join("result.json");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| CliError::runner_because(format!("{}", path.display()), e))?;
            let result: TrialResult = serde_json::from_str(&text)
                .map_err(|e| CliError::runner_because(format!("{}", path.display()), e))?;
            trials.push(Trial { result, dir });
        }
        Ok(trials)
    }
}

/// The reward a check judges: `reward` when the verifier wrote it, else the smallest of the
/// rewards (a task "scores 1" when every reward is 1); `None` without rewards.
pub fn score(result: &TrialResult) -> Option<f64> {
    let rewards = result.verifier_result.as_ref()?.rewards.as_ref()?;
    rewards
        .get("reward")
        .copied()
        .or_else(|| rewards.values().copied().reduce(f64::min))
}

/// The trial's exception as one line, if it has one.
pub fn exception(result: &TrialResult) -> Option<String> {
    result.exception_info.as_ref().map(|e| e.headline())
}

/// How long the agent ran, in seconds.
pub fn agent_seconds(result: &TrialResult) -> Option<f64> {
    let timing = result.agent_execution.as_ref()?;
    let (start, end) = (timing.started_at?, timing.finished_at?);
    Some((end - start).num_milliseconds() as f64 / 1000.0)
}
