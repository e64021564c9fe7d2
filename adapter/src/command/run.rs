//! The run phase of a command-style agent: the instruction file, the command under the agent
//! deadline with its output in files, the trace files, and the trajectory.
//!
//! The command's stdout and stderr go to files under `/logs/agent/command/` in the container,
//! never through the runner's memory: the runner collects `/logs/agent` after the run within
//! the trial's download budget, so a flood of output is cut there with a marker.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tasks::records::AgentContext;
use tasks::{ExecRequest, Sandbox, shell_quote};

use super::agent::CommandAgent;
use super::config::CommandTrajectoryFormat;
use super::deadline::DeadlineTold;
use super::{claude_code, codex, mini_swe, trace_pattern};
use crate::agent::{AgentError, AgentErrorKind, AgentRun, AgentRunReport};
use crate::installed::trial_files;

/// The command's outputs in the container (collected with `/logs/agent`).
const OUTPUT_DIR: &str = "/logs/agent/command";

impl CommandAgent {
    fn stage_dir(&self) -> String {
        format!("/tmp/runner-agent-{}", self.config.name)
    }

    /// Uploads `sent` (the instruction with the agent's suffix, and the deadline when `told`)
    /// and runs the command; then traces, trajectory and context.
    pub(super) async fn run_command<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        sent: &str,
        told: Option<&DeadlineTold>,
    ) -> Result<AgentRunReport, AgentError> {
        let instruction_file = format!("{}/instruction.md", self.stage_dir());
        sandbox
            .upload_bytes(sent.as_bytes().to_vec(), &instruction_file, 0o644)
            .await?;
        let workdir = self.workdir(sandbox, run).await?;
        let timeout_sec = run
            .agent_timeout_sec
            .map_or_else(|| "0".to_owned(), |s| (s.ceil() as u64).to_string());
        let run_values = BTreeMap::from([
            ("instruction_file", instruction_file),
            ("workdir", workdir),
            ("agent_timeout_sec", timeout_sec),
        ]);
        let command = self.fill(&self.config.run.command, &run_values)?;
        trial_files::write(&run.trial_dir, "command/command.txt", command.as_bytes())?;
        let out = shell_quote(OUTPUT_DIR);
        trial_files::run_root_step(
            sandbox,
            format!("mkdir -p {out} && chmod 777 {out}"),
            Duration::from_secs(30),
            AgentErrorKind::Sandbox,
            &format!("creating {OUTPUT_DIR}"),
        )
        .await?;
        let mut script = format!("( {command}\n) </dev/null >{out}/stdout.txt 2>{out}/stderr.txt");
        if let Some(end) = &run.end_turn {
            // In the same shell, before it exits: whoever watches this shell sees it gone only
            // after the turn has ended. The command's own exit code stays the exec's.
            script.push_str(&format!("\nrc=$?; {}; exit $rc", end.in_container));
        }
        let mut request = ExecRequest::new(script)
            .maybe_user(self.user(run))
            .envs(&self.container_env);
        if let Some(deadline) = run.run_deadline {
            request = request.timeout(deadline.saturating_duration_since(Instant::now()));
        }
        let output = sandbox.exec(request).await;
        run.end_turn_now();
        let output = output?;
        let code = match (output.timed_out, output.exit_code) {
            (true, _) => "timeout".to_owned(),
            (false, Some(code)) => code.to_string(),
            (false, None) => "none".to_owned(),
        };
        trial_files::write(
            &run.trial_dir,
            "command/return-code.txt",
            format!("{code}\n").as_bytes(),
        )?;
        let outcome = if output.timed_out {
            let secs = run.agent_timeout_sec.unwrap_or_default();
            Err(AgentError::new(
                AgentErrorKind::Timeout,
                format!(
                    "Agent execution timed out after {secs} seconds; the agent command was killed"
                ),
            ))
        } else if !output.success() {
            Err(AgentError::new(
                AgentErrorKind::NonZeroExit,
                format!("the agent command exited with {code}; see agent/command/stderr.txt"),
            ))
        } else {
            Ok(())
        };
        self.finish(sandbox, run, &code, told, outcome).await
    }

    /// The task's working directory as the agent user sees it.
    async fn workdir<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<String, AgentError> {
        let request = ExecRequest::new("pwd")
            .maybe_user(self.user(run))
            .timeout(Duration::from_secs(30));
        let out = sandbox.exec(request).await?;
        let dir = out.stdout.trim();
        if !out.success() || !dir.starts_with('/') {
            return Err(AgentError::new(
                AgentErrorKind::Sandbox,
                format!(
                    "cannot tell the task's working directory: {}",
                    out.stderr.trim()
                ),
            ));
        }
        Ok(dir.to_owned())
    }

    /// Traces, trajectory and context (with the command's return code, and the deadline when
    /// it was told) after the command ended; `outcome` decides the result, and trajectory
    /// problems surface only when it is Ok (a killed agent's trace may be cut).
    async fn finish<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        code: &str,
        told: Option<&DeadlineTold>,
        outcome: Result<(), AgentError>,
    ) -> Result<AgentRunReport, AgentError> {
        let trajectory = match self.collect_traces(sandbox, run).await {
            Ok(()) => self.write_trajectory(run),
            Err(e) => Err(e),
        };
        let mut context = match &trajectory {
            Ok(Some(context)) => context.clone(),
            _ => AgentContext::default(),
        };
        let mut metadata = serde_json::Map::new();
        metadata.insert("return_code".into(), json!(code));
        if let Some(told) = told {
            metadata.insert("deadline_told".into(), told.record());
        }
        context.metadata = Some(metadata);
        outcome.map_err(|e| e.with_context(Some(context.clone())))?;
        trajectory.map_err(|e| e.with_context(Some(context.clone())))?;
        Ok(AgentRunReport {
            context: Some(context),
        })
    }

    /// Copies the configured trace paths (files or directories; globs allowed) into
    /// `agent/traces/`, within the trial's download budget. Missing paths are skipped: an agent
    /// killed early may not have written them.
    async fn collect_traces<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<(), AgentError> {
        if self.config.traces.files.is_empty() {
            return Ok(());
        }
        let stage = shell_quote(&format!("{}/traces", self.stage_dir()));
        let paths = self.config.traces.files.join(" ");
        let script = format!(
            "rm -rf {stage} && mkdir -p {stage} || exit 1\nfor p in {paths}; do if [ -e \"$p\" ]; then cp -rP \"$p\" {stage}/; fi; done\nexit 0"
        );
        let out = sandbox
            .exec(ExecRequest::root(script).timeout(Duration::from_secs(120)))
            .await?;
        if !out.success() {
            tracing::warn!("collecting agent traces: {}", out.stderr.trim());
        }
        let target = trial_files::agent_dir(&run.trial_dir).join("traces");
        sandbox
            .download_dir(&format!("{}/traces", self.stage_dir()), &target)
            .await?;
        Ok(())
    }

    /// Writes `agent/trajectory.json` from the configured trace; returns its token counts.
    fn write_trajectory(&self, run: &AgentRun<'_>) -> Result<Option<AgentContext>, AgentError> {
        let format = self.config.trajectory.format;
        let Some(file) = self.config.trajectory.file.as_deref() else {
            return Ok(None);
        };
        if format == CommandTrajectoryFormat::None {
            return Ok(None);
        }
        let traces = trial_files::agent_dir(&run.trial_dir).join("traces");
        let fail = |message: String| {
            trial_files::trajectory_error(&run.trial_dir, &message, message.clone())
        };
        let (path, name) = if format.by_pattern() {
            let path = trace_pattern::newest_match(&traces, file).ok_or_else(|| {
                fail(format!(
                    "the agent wrote no log matching agent/traces/{file}"
                ))
            })?;
            let name = path
                .strip_prefix(&traces)
                .unwrap_or(&path)
                .display()
                .to_string();
            (path, name)
        } else {
            (traces.join(file), file.to_owned())
        };
        let bytes =
            tasks::bounded::read_capped(&path, tasks::bounded::MAX_TRAJECTORY_BYTES, "trajectory")
                .map_err(|e| fail(format!("reading agent/traces/{name}: {e}")))?;
        let converted = |result: Result<tasks::atif::Trajectory, super::session_log::LogError>| {
            result
                .map(|t| t.to_value())
                .map_err(|e| fail(format!("converting agent/traces/{name} to ATIF: {e}")))
        };
        let model = self.model.as_deref();
        let value = match format {
            CommandTrajectoryFormat::ClaudeCode => converted(claude_code::convert(&bytes, model))?,
            CommandTrajectoryFormat::Codex => converted(codex::convert(&bytes, model))?,
            CommandTrajectoryFormat::Atif | CommandTrajectoryFormat::MiniSweAgent => {
                let document: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| fail(format!("agent/traces/{name} is not JSON: {e}")))?;
                if format == CommandTrajectoryFormat::Atif {
                    document
                } else {
                    let session = run
                        .trial_dir
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    mini_swe::convert(&document, &session, model)
                        .map_err(|e| fail(format!("converting agent/traces/{name} to ATIF: {e}")))?
                        .to_value()
                }
            }
            CommandTrajectoryFormat::None => return Ok(None),
        };
        trial_files::save_trajectory(&run.trial_dir, &name, &value, fail)
    }
}
