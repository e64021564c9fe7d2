//! The run phase of an installed agent: polling the task to a final status, cancelling it at
//! the deadline, and collecting traces, the trajectory and the server log.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tasks::records::AgentContext;
use tasks::{ExecRequest, Sandbox, shell_quote};

use super::super::config::TrajectoryFormat;
use super::super::server;
use super::super::task_api::{ApiError, TaskApi, TaskStatus, next_interval};
use super::super::trajectory::{self, TrajectoryAgent};
use super::super::transport::TransportError;
use super::super::trial_files;
use super::{InstalledAgent, MAX_POLL_FAILURES};
use crate::agent::{Agent, AgentError, AgentErrorKind, AgentRun, AgentRunReport};

impl InstalledAgent {
    /// Polls until a final status, the deadline, or a broken server.
    pub(super) async fn poll<S: Sandbox>(
        &self,
        sandbox: &S,
        api: &TaskApi<'_>,
        id: &str,
        deadline: Option<Instant>,
    ) -> PollOutcome {
        let max = Duration::from_secs_f64(self.config.api.poll_max_interval_sec);
        let mut interval = Duration::from_secs_f64(self.config.api.poll_interval_sec);
        let mut failures = 0u32;
        let mut last: Option<TaskStatus> = None;
        loop {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return PollOutcome::Deadline(last);
            }
            let wait =
                deadline.map_or(interval, |d| interval.min(d.saturating_duration_since(now)));
            tokio::time::sleep(wait).await;
            let limit = deadline
                .map_or(Duration::from_secs(30), |d| {
                    d.saturating_duration_since(Instant::now())
                        .min(Duration::from_secs(30))
                })
                .max(Duration::from_secs(2));
            match api.status(sandbox, id, limit).await {
                Ok(status) if api.is_final(&status.status) => return PollOutcome::Final(status),
                Ok(status) => {
                    failures = 0;
                    last = Some(status);
                }
                Err(ApiError::Transport(TransportError::Sandbox(e))) => {
                    return PollOutcome::Failed(e.into());
                }
                Err(ApiError::Transport(e)) => {
                    failures += 1;
                    let dead = !server::is_alive(sandbox, &self.paths())
                        .await
                        .unwrap_or(true);
                    if dead || failures >= MAX_POLL_FAILURES {
                        return PollOutcome::Failed(self.server_error(sandbox, e).await);
                    }
                }
                Err(e @ ApiError::Answer { .. }) => {
                    failures += 1;
                    if failures >= MAX_POLL_FAILURES {
                        let msg = format!(
                            "the agent server keeps answering status polls badly ({e}); see agent/server.log"
                        );
                        return PollOutcome::Failed(AgentError::new(AgentErrorKind::Server, msg));
                    }
                }
            }
            interval = next_interval(interval, max);
        }
    }

    /// After the deadline: cancel, then give the agent a short grace to reach a final state.
    pub(super) async fn cancel<S: Sandbox>(
        &self,
        sandbox: &S,
        api: &TaskApi<'_>,
        id: &str,
    ) -> Option<TaskStatus> {
        let timeout = Duration::from_secs(10);
        if let Err(e) = api.cancel(sandbox, id, timeout).await {
            tracing::warn!("cancelling agent task {id}: {e}");
        }
        let grace = Instant::now() + Duration::from_secs_f64(self.config.api.cancel_grace_sec);
        match self.poll(sandbox, api, id, Some(grace)).await {
            PollOutcome::Final(status) => Some(status),
            PollOutcome::Deadline(last) => last,
            PollOutcome::Failed(_) => None,
        }
    }

    /// Copies the configured trace files into `agent/traces/`.
    pub(super) async fn collect_traces<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        task_id: Option<&str>,
    ) -> Result<(), AgentError> {
        if self.config.traces.files.is_empty() {
            return Ok(());
        }
        let stage = format!("/tmp/runner-agent-{}-traces", self.config.name);
        let mut script = format!("rm -rf {0} && mkdir -p {0}\n", shell_quote(&stage));
        for path in &self.config.traces.files {
            let path = path.replace("{task_id}", task_id.unwrap_or("unknown"));
            script.push_str(&format!(
                "for p in {0}; do [ -e \"$p\" ] && cp -rP \"$p\" {1}/; done\n",
                path,
                shell_quote(&stage)
            ));
        }
        script.push_str("true\n");
        let out = sandbox
            .exec(ExecRequest::root(script).timeout(Duration::from_secs(120)))
            .await?;
        if !out.success() {
            tracing::warn!("collecting agent traces: {}", out.stderr.trim());
        }
        sandbox
            .download_dir(
                &stage,
                &trial_files::agent_dir(&run.trial_dir).join("traces"),
            )
            .await?;
        Ok(())
    }

    /// Writes `agent/trajectory.json` from the traces; returns token counts from it.
    pub(super) fn write_trajectory(
        &self,
        run: &AgentRun<'_>,
        session_id: &str,
        sent: &str,
        version: &str,
    ) -> Result<Option<AgentContext>, AgentError> {
        let format = self.config.trajectory.format;
        let Some(file) = self
            .config
            .trajectory
            .file
            .as_deref()
            .filter(|_| format != TrajectoryFormat::None)
        else {
            return Ok(None);
        };
        let path = trial_files::agent_dir(&run.trial_dir)
            .join("traces")
            .join(file);
        let fail = |message: String| {
            let shown = format!("task {}: {message}", run.task.name);
            trial_files::trajectory_error(&run.trial_dir, &message, shown)
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            fail(format!(
                "the agent's trace file {file} was not collected into agent/traces/ ({e})"
            ))
        })?;
        let value: Value = match format {
            TrajectoryFormat::Events => {
                let agent = TrajectoryAgent {
                    name: &self.config.name,
                    version,
                    model_name: self.config.model_name.as_deref(),
                };
                trajectory::convert_events(&text, &agent, session_id, sent)
                    .map_err(|e| fail(format!("converting agent/traces/{file} to ATIF: {e}")))?
            }
            TrajectoryFormat::Atif => serde_json::from_str(&text)
                .map_err(|e| fail(format!("agent/traces/{file} is not JSON: {e}")))?,
            TrajectoryFormat::None => return Ok(None),
        };
        trial_files::save_trajectory(&run.trial_dir, file, &value, fail)
    }

    /// Everything after the task ended (or could not go on): traces, server log, trajectory,
    /// context. `outcome` decides the result; trajectory problems only surface when it is Ok.
    pub(super) async fn finish<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        sent: &str,
        task_id: Option<&str>,
        final_status: Option<&TaskStatus>,
        outcome: Result<(), AgentError>,
    ) -> Result<AgentRunReport, AgentError> {
        let traces = self.collect_traces(sandbox, run, task_id).await;
        self.save_server_log(sandbox, run).await;
        // A multi-step task's later steps still need the server: stop it after the last.
        let last_run = run.step.is_none()
            || run.task.config.steps.last().map(|s| &s.name) == run.step.as_ref();
        if self.config.server.stop_after_run && last_run {
            let _ = server::stop(sandbox, &self.paths()).await;
        }
        if let Some(status) = final_status {
            let text = serde_json::to_string_pretty(&status.body).unwrap_or_default();
            trial_files::write(&run.trial_dir, "task-status.json", text.as_bytes())?;
        }
        let version = self.version();
        let session_id = task_id.map_or_else(
            || {
                run.trial_dir
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            },
            str::to_owned,
        );
        let trajectory =
            traces.and_then(|()| self.write_trajectory(run, &session_id, sent, &version));
        let mut context = match &trajectory {
            Ok(Some(context)) => context.clone(),
            _ => final_status
                .and_then(|s| trajectory::context_from_usage(&s.body))
                .unwrap_or_default(),
        };
        let mut metadata = serde_json::Map::new();
        metadata.insert("task_id".into(), json!(task_id));
        metadata.insert(
            "final_status".into(),
            json!(final_status.map(|s| s.status.clone())),
        );
        metadata.insert(
            "succeeded".into(),
            json!(
                final_status.is_some_and(|s| self.config.api.success_statuses.contains(&s.status))
            ),
        );
        context.metadata = Some(metadata);
        outcome.map_err(|e| e.with_context(Some(context.clone())))?;
        trajectory.map_err(|e| e.with_context(Some(context.clone())))?;
        Ok(AgentRunReport {
            context: Some(context),
        })
    }
}

/// How polling ended.
pub(super) enum PollOutcome {
    Final(TaskStatus),
    Deadline(Option<TaskStatus>),
    Failed(AgentError),
}
