//! `InstalledAgent`: uploads the agent's source with provenance, installs it, starts its server
//! inside the container, and drives one task through the server's HTTP task API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tasks::records::{AgentConfig, AgentContext};
use tasks::{ExecRequest, Sandbox, shell_quote};

use super::config::{AgentConfigError, InstalledAgentConfig, TrajectoryFormat, is_env_name};
use super::server::{self, ServerPaths, ServerStart};
use super::task_api::{ApiError, Submission, TaskApi, TaskStatus, next_interval};
use super::trajectory::{self, TrajectoryAgent};
use super::transport::{InContainerHttp, TransportError};
use super::trial_files::{self, fill_placeholders};
use crate::agent::{Agent, AgentError, AgentErrorKind, AgentRun, AgentRunReport};
use crate::secrets::{check_container_env, redact_env};

/// Setup work stops this long before the setup deadline, so the agent (not the runner's
/// backstop) reports what failed and saves the server log.
const SETUP_MARGIN: Duration = Duration::from_secs(2);

/// Consecutive failed polls of a live server tolerated before it counts as broken.
const MAX_POLL_FAILURES: u32 = 5;

/// An agent installed into each trial's container and driven through its task API.
#[derive(Debug, Clone)]
pub struct InstalledAgent {
    config: InstalledAgentConfig,
    container_env: BTreeMap<String, String>,
    allow_container_secrets: bool,
    source: Arc<provenance::PackagedSource>,
}

impl InstalledAgent {
    /// Checks the secret boundary and packages the source once for the whole job.
    ///
    /// `extra_env` (from `--agent-env`) overrides the config's `[env]`. Unless
    /// `allow_container_secrets`, env holding credentials is refused. With
    /// `require_clean_source`, a source tree with uncommitted changes is refused.
    pub fn new(
        config: InstalledAgentConfig,
        extra_env: BTreeMap<String, String>,
        allow_container_secrets: bool,
        require_clean_source: bool,
    ) -> Result<Self, AgentConfigError> {
        let file = config.config_file.clone();
        if let Some(name) = extra_env.keys().find(|n| !is_env_name(n)) {
            return Err(AgentConfigError::Invalid {
                file,
                key: "--agent-env".into(),
                message: format!("`{name}` is not a valid environment variable name"),
            });
        }
        let mut container_env = config.env.clone();
        container_env.extend(extra_env);
        if !allow_container_secrets {
            check_container_env(&container_env).map_err(|source| AgentConfigError::Secret {
                file: file.clone(),
                source,
            })?;
        }
        // Values that must never be inside uploaded files: the host's credentials and any
        // credential-looking value bound for the container.
        let mut known_secrets = ::secrets::host_credentials();
        known_secrets.extend(::secrets::credentials(container_env.clone()));
        let options = provenance::SourceOptions {
            root: config.source_dir(),
            extra_excludes: config.source.excludes.clone(),
            known_secrets,
            require_clean: require_clean_source,
        };
        let source = provenance::package_source(&options)
            .map_err(|source| AgentConfigError::Source { file, source })?;
        Ok(Self {
            config,
            container_env,
            allow_container_secrets,
            source: Arc::new(source),
        })
    }

    /// The loaded config.
    pub fn config(&self) -> &InstalledAgentConfig {
        &self.config
    }

    /// The job config's `agents[]` entry: name, model, kwargs, env with sensitive values redacted.
    pub fn job_agent_config(&self) -> AgentConfig {
        AgentConfig {
            name: Some(self.config.name.clone()),
            model_name: self.config.model_name.clone(),
            kwargs: self.config.kwargs.clone(),
            env: redact_env(&self.container_env),
            ..Default::default()
        }
    }

    /// The text appended to every instruction, recorded in the job config.
    pub fn instruction_suffix(&self) -> Option<&str> {
        self.config.instruction_suffix.as_deref()
    }

    /// True when the user opted in to credentials in the container (job not publishable).
    pub fn allow_container_secrets(&self) -> bool {
        self.allow_container_secrets
    }

    /// The provenance record written to every trial (also for the summary: dirty or not).
    pub fn source_provenance(&self) -> &provenance::SourceProvenance {
        &self.source.provenance
    }

    /// The exact text sent for `instruction`: the instruction verbatim, then the suffix.
    pub fn instruction_text(&self, instruction: &str) -> String {
        format!(
            "{instruction}{}",
            self.config
                .instruction_suffix
                .as_deref()
                .unwrap_or_default()
        )
    }

    fn paths(&self) -> ServerPaths {
        ServerPaths::new(&self.config.name)
    }

    /// Copies the server log to `agent/server.log` (best effort; see [`server::save_log`]).
    async fn save_server_log<S: Sandbox>(&self, sandbox: &S, run: &AgentRun<'_>) {
        let host_path = trial_files::agent_dir(&run.trial_dir).join("server.log");
        server::save_log(sandbox, &self.paths(), &host_path).await;
    }

    fn http(&self) -> InContainerHttp {
        InContainerHttp::new(self.config.server.port)
    }

    fn server_user<'a>(&'a self, run: &'a AgentRun<'_>) -> Option<&'a str> {
        self.config.server.user.as_deref().or(run.user.as_deref())
    }

    fn env_with(&self, workspace_root: Option<&str>) -> BTreeMap<String, String> {
        let mut env = self.container_env.clone();
        env.insert("AGENT_SOURCE_DIR".into(), self.config.install_path());
        env.insert("AGENT_PORT".into(), self.config.server.port.to_string());
        if let Some(root) = workspace_root {
            env.insert("AGENT_WORKSPACE_ROOT".into(), root.into());
        }
        env
    }

    fn fill(&self, command: &str, workspace_root: Option<&str>) -> String {
        fill_placeholders(
            command,
            &self.config.install_path(),
            self.config.server.port,
            workspace_root,
        )
    }

    /// The workspace root: the config's override, else the task workdir if it exists, else
    /// `/app` or `/workspace` if one exists, else a new `/app` owned by the agent user.
    async fn workspace_root<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<String, AgentError> {
        let workdir = run
            .task
            .config
            .environment
            .workdir
            .clone()
            .unwrap_or_default();
        let script = r#"if [ -n "$OVERRIDE" ]; then mkdir -p "$OVERRIDE" && chown "$AGENT_USER" "$OVERRIDE" 2>/dev/null; echo "$OVERRIDE"; exit 0; fi
for d in "$WORKDIR" /app /workspace; do
  if [ -n "$d" ] && [ -d "$d" ]; then echo "$d"; exit 0; fi
done
mkdir -p /app && { [ -z "$AGENT_USER" ] || chown "$AGENT_USER" /app; } && echo /app
"#;
        let mut request = ExecRequest::new(script)
            .user("root")
            .timeout(Duration::from_secs(30));
        request.env.insert(
            "OVERRIDE".into(),
            self.config.workspace_root.clone().unwrap_or_default(),
        );
        request.env.insert("WORKDIR".into(), workdir);
        request
            .env
            .insert("AGENT_USER".into(), run.user.clone().unwrap_or_default());
        let out = sandbox.exec(request).await?;
        let root = out
            .stdout
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if !out.success() || root.is_empty() {
            return Err(AgentError::new(
                AgentErrorKind::SetupFailed,
                format!(
                    "task {}: resolving the workspace root failed: {}",
                    run.task.name,
                    out.stderr.trim()
                ),
            ));
        }
        Ok(root)
    }

    async fn upload_source<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<(), AgentError> {
        trial_files::write(
            &run.trial_dir,
            "source-provenance.json",
            self.source.provenance.to_json().as_bytes(),
        )?;
        let archive = format!("/tmp/runner-agent-src-{}.tar.gz", self.config.name);
        sandbox
            .upload_bytes(self.source.tar_gz.clone(), &archive, 0o644)
            .await?;
        let dest = self.config.install_path();
        let cmd = format!(
            "mkdir -p {dest} && tar -xzf {archive} -C {dest} && rm -f {archive}",
            dest = shell_quote(&dest),
            archive = shell_quote(&archive)
        );
        trial_files::run_root_step(
            sandbox,
            cmd,
            Duration::from_secs(120),
            AgentErrorKind::SetupFailed,
            &format!("unpacking the agent source into {dest}"),
        )
        .await?;
        Ok(())
    }

    async fn install<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        deadline: Instant,
    ) -> Result<(), AgentError> {
        let env = self.env_with(None);
        for (index, command) in self.config.install.commands.iter().enumerate() {
            let command = self.fill(command, None);
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(AgentError::new(
                    AgentErrorKind::SetupTimeout,
                    format!(
                        "agent setup deadline reached before install command {index} (`{command}`)"
                    ),
                ));
            }
            let mut request = ExecRequest::new(format!("set -o pipefail; {command}"))
                .user("root")
                .envs(&env)
                .timeout(remaining);
            request.cwd = Some(self.config.install_path());
            request
                .env
                .insert("DEBIAN_FRONTEND".into(), "noninteractive".into());
            let out = sandbox.exec(request).await?;
            trial_files::save_command(&run.trial_dir, index, &command, &out)?;
            if out.timed_out {
                return Err(AgentError::new(
                    AgentErrorKind::SetupTimeout,
                    format!(
                        "install command {index} (`{command}`) hit the agent setup deadline; see agent/setup/command-{index}/"
                    ),
                ));
            }
            if !out.success() {
                let code = out.exit_code.map_or("none".into(), |c| c.to_string());
                return Err(AgentError::new(
                    AgentErrorKind::SetupFailed,
                    format!(
                        "install command {index} (`{command}`) exited with {code}; see agent/setup/command-{index}/stderr.txt"
                    ),
                ));
            }
        }
        Ok(())
    }

    async fn learn_version<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<Option<String>, AgentError> {
        let Some(command) = &self.config.version_command else {
            return Ok(None);
        };
        let command = self.fill(command, None);
        let mut request = ExecRequest::new(command.clone())
            .maybe_user(run.user.as_deref())
            .envs(&self.env_with(None));
        request.cwd = Some(self.config.install_path());
        let out = sandbox
            .exec(request.timeout(Duration::from_secs(60)))
            .await?;
        let version = out
            .stdout
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned);
        match version {
            Some(version) if out.success() => Ok(Some(version)),
            _ => Err(AgentError::new(
                AgentErrorKind::SetupFailed,
                format!(
                    "version_command `{command}` failed or printed nothing: {}",
                    out.stderr.trim()
                ),
            )),
        }
    }

    async fn start_server<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        deadline: Instant,
    ) -> Result<(), AgentError> {
        let workspace_root = self.workspace_root(sandbox, run).await?;
        let command = self.fill(&self.config.server.command, Some(&workspace_root));
        let env = self.env_with(Some(&workspace_root));
        let install_path = self.config.install_path();
        let start = ServerStart {
            command: &command,
            cwd: &install_path,
            user: self.server_user(run),
            env: &env,
        };
        let paths = self.paths();
        server::start(sandbox, &paths, &start).await?;
        server::wait_healthy(
            sandbox,
            &self.http(),
            &paths,
            &self.config.server.health_path,
            deadline,
        )
        .await?;
        Ok(())
    }

    async fn server_error<S: Sandbox>(&self, sandbox: &S, error: TransportError) -> AgentError {
        let alive = server::is_alive(sandbox, &self.paths())
            .await
            .unwrap_or(false);
        let state = if alive {
            "is running but does not answer"
        } else {
            "is no longer running"
        };
        AgentError::new(
            AgentErrorKind::Server,
            format!("the agent server {state} ({error}); see agent/server.log"),
        )
    }

    /// Polls until a final status, the deadline, or a broken server.
    async fn poll<S: Sandbox>(
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
    async fn cancel<S: Sandbox>(
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
    async fn collect_traces<S: Sandbox>(
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
            .exec(
                ExecRequest::new(script)
                    .user("root")
                    .timeout(Duration::from_secs(120)),
            )
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
    fn write_trajectory(
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
            let _ = trial_files::write(
                &run.trial_dir,
                "trajectory-error.txt",
                format!("{message}\n").as_bytes(),
            );
            AgentError::new(
                AgentErrorKind::Trajectory,
                format!("task {}: {message}", run.task.name),
            )
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
        trajectory::validate(&value).map_err(|e| {
            fail(format!(
                "the trajectory from agent/traces/{file} is not valid ATIF: {e}"
            ))
        })?;
        let path = trial_files::agent_dir(&run.trial_dir).join("trajectory.json");
        tasks::atomic::write_json_atomic(&path, &value).map_err(|e| {
            AgentError::new(
                AgentErrorKind::Sandbox,
                format!("writing {}: {e}", path.display()),
            )
        })?;
        Ok(trajectory::context_from_trajectory(&value))
    }

    /// Everything after the task ended (or could not go on): traces, server log, trajectory,
    /// context. `outcome` decides the result; trajectory problems only surface when it is Ok.
    async fn finish<S: Sandbox>(
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
        if self.config.server.stop_after_run {
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

enum PollOutcome {
    Final(TaskStatus),
    Deadline(Option<TaskStatus>),
    Failed(AgentError),
}

impl Agent for InstalledAgent {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn version(&self) -> String {
        self.config
            .version
            .clone()
            .unwrap_or_else(|| "unknown".into())
    }

    fn model_name(&self) -> Option<String> {
        self.config.model_name.clone()
    }

    async fn setup<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<Option<String>, AgentError> {
        let deadline = run
            .setup_deadline
            .checked_sub(SETUP_MARGIN)
            .unwrap_or(run.setup_deadline);
        self.upload_source(sandbox, run).await?;
        self.install(sandbox, run, deadline).await?;
        let version = self.learn_version(sandbox, run).await?;
        let started = self.start_server(sandbox, run, deadline).await;
        // Always saved: when the server crashed or never became healthy it is the only clue.
        self.save_server_log(sandbox, run).await;
        started?;
        Ok(version)
    }

    async fn run<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        instruction: &str,
    ) -> Result<AgentRunReport, AgentError> {
        let sent = self.instruction_text(instruction);
        trial_files::write(&run.trial_dir, "instruction.txt", sent.as_bytes())?;
        let workspace_root = self.workspace_root(sandbox, run).await?;
        let http = self.http();
        let api = TaskApi {
            http: &http,
            api: &self.config.api,
        };
        let submission = Submission {
            instruction: &sent,
            workspace_root: &workspace_root,
            timeout_sec: run.agent_timeout_sec,
            task_name: &run.task.name,
        };
        let submit_limit = run
            .run_deadline
            .map_or(Duration::from_secs(60), |d| {
                d.saturating_duration_since(Instant::now())
                    .min(Duration::from_secs(60))
            })
            .max(Duration::from_secs(2));
        let id = match api.submit(sandbox, &submission, submit_limit).await {
            Ok(id) => id,
            Err(ApiError::Transport(TransportError::Sandbox(e))) => return Err(e.into()),
            Err(ApiError::Transport(e)) => {
                let error = self.server_error(sandbox, e).await;
                return self
                    .finish(sandbox, run, &sent, None, None, Err(error))
                    .await;
            }
            Err(e @ ApiError::Answer { .. }) => {
                let error = AgentError::new(
                    AgentErrorKind::NonZeroExit,
                    format!("the agent refused the task: {e}"),
                );
                return self
                    .finish(sandbox, run, &sent, None, None, Err(error))
                    .await;
            }
        };
        match self.poll(sandbox, &api, &id, run.run_deadline).await {
            // A failed or cancelled final status is the agent's own outcome: recorded in
            // agent_result.metadata and task-status.json; the verifier decides the reward.
            PollOutcome::Final(status) => {
                self.finish(sandbox, run, &sent, Some(&id), Some(&status), Ok(()))
                    .await
            }
            PollOutcome::Deadline(last) => {
                let after_cancel = self.cancel(sandbox, &api, &id).await.or(last);
                let secs = run.agent_timeout_sec.unwrap_or_default();
                let error = AgentError::new(
                    AgentErrorKind::Timeout,
                    format!(
                        "Agent execution timed out after {secs} seconds; the agent's task {id} was cancelled"
                    ),
                );
                self.finish(
                    sandbox,
                    run,
                    &sent,
                    Some(&id),
                    after_cancel.as_ref(),
                    Err(error),
                )
                .await
            }
            PollOutcome::Failed(error) => {
                self.finish(sandbox, run, &sent, Some(&id), None, Err(error))
                    .await
            }
        }
    }
}
