//! `InstalledAgent`: uploads the agent's source with provenance, installs it, starts its server
//! inside the container, and drives one task through the server's HTTP task API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tasks::Sandbox;

use super::config::{AgentConfigError, InstalledAgentConfig, is_env_name};
use super::server::{self, ServerPaths};
use super::task_api::{ApiError, Submission, TaskApi};
use super::task_extras;
use super::transport::{InContainerHttp, TransportError};
use super::trial_files::{self, fill_placeholders};
use crate::agent::{Agent, AgentError, AgentErrorKind, AgentRun, AgentRunReport};
use crate::secrets::check_container_env;

/// Consecutive failed polls of a live server tolerated before it counts as broken.
const MAX_POLL_FAILURES: u32 = 5;

mod drive;
mod setup;

use drive::PollOutcome;

/// An agent installed into each trial's container and driven through its task API.
#[derive(Debug, Clone)]
pub struct InstalledAgent {
    config: InstalledAgentConfig,
    /// The config's `model_name`, else the first of its `models`.
    model: Option<String>,
    /// The config's kwargs (installed agents take no `--ak`).
    kwargs: serde_json::Map<String, serde_json::Value>,
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
            model: config
                .model_name
                .clone()
                .or_else(|| config.models.first().cloned()),
            kwargs: config.kwargs.clone(),
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

    /// The submission's metadata beyond Harbor's: the task's skills and MCP servers, and the
    /// step of a multi-step task.
    fn submission_extras(&self, run: &AgentRun<'_>) -> serde_json::Map<String, serde_json::Value> {
        let mut extras = task_extras::submission_metadata(run.task, &self.config.skills);
        if let Some(step) = &run.step {
            extras.insert("step".into(), serde_json::json!(step));
        }
        extras
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
}

impl Agent for InstalledAgent {
    crate::file_agent::identity_methods!();

    async fn setup<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<Option<String>, AgentError> {
        let deadline = run.setup_work_deadline();
        self.upload_source(sandbox, run).await?;
        self.install(sandbox, run, deadline).await?;
        let version = self.learn_version(sandbox, run).await?;
        // Resolved once, so the config file's references and the server's env agree.
        let headers = task_extras::resolve_headers(run.task, &self.container_env)?;
        task_extras::register(
            sandbox,
            run.task,
            &self.config.skills,
            &self.config.mcp,
            &headers,
            self.server_user(run),
        )
        .await?;
        let started = self.start_server(sandbox, run, deadline, &headers).await;
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
        let sent = run.record_instruction(instruction, self.instruction_suffix())?;
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
            extra_metadata: self.submission_extras(run),
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
        let polled = self.poll(sandbox, &api, &id, run.run_deadline).await;
        // The agent's task has ended (or its deadline passed): its turn is over before its
        // traces are collected.
        run.end_turn_now();
        match polled {
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
