//! The setup phase of an installed agent: the workspace root, the source upload, the install
//! commands, the version and the server start.

use std::time::{Duration, Instant};

use tasks::{ExecRequest, Sandbox, shell_quote};

use super::super::server::{self, ServerStart};
use super::super::transport::TransportError;
use super::super::trial_files;
use super::InstalledAgent;
use crate::agent::{AgentError, AgentErrorKind, AgentRun};

impl InstalledAgent {
    /// The workspace root: the config's override, else the task workdir if it exists, else
    /// `/app` or `/workspace` if one exists, else a new `/app` owned by the agent user.
    pub(super) async fn workspace_root<S: Sandbox>(
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
        let mut request = ExecRequest::root(script).timeout(Duration::from_secs(30));
        request.env.insert(
            "OVERRIDE".into(),
            self.config.workspace_root.clone().unwrap_or_default(),
        );
        request.env.insert("WORKDIR".into(), workdir);
        request
            .env
            .insert("AGENT_USER".into(), run.user.clone().unwrap_or_default());
        let out = sandbox.exec(request).await?;
        let root = out.last_line().to_owned();
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

    pub(super) async fn upload_source<S: Sandbox>(
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

    pub(super) async fn install<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        deadline: Instant,
    ) -> Result<(), AgentError> {
        let commands: Vec<String> = self
            .config
            .install
            .commands
            .iter()
            .map(|c| self.fill(c, None))
            .collect();
        let cwd = self.config.install_path();
        trial_files::run_install_commands(
            sandbox,
            &run.trial_dir,
            &commands,
            &self.env_with(None),
            Some(&cwd),
            deadline,
        )
        .await
    }

    pub(super) async fn learn_version<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
    ) -> Result<Option<String>, AgentError> {
        let command = self.config.version_command.as_deref();
        trial_files::learn_version(
            sandbox,
            command.map(|c| self.fill(c, None)).as_deref(),
            run.user.as_deref(),
            &self.env_with(None),
            Some(&self.config.install_path()),
        )
        .await
    }

    pub(super) async fn start_server<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        deadline: Instant,
        headers: &tasks::mcp_headers::HeaderEnv,
    ) -> Result<(), AgentError> {
        let workspace_root = self.workspace_root(sandbox, run).await?;
        let command = self.fill(&self.config.server.command, Some(&workspace_root));
        let mut env = self.env_with(Some(&workspace_root));
        env.extend(super::task_extras::server_env(run.task, headers));
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

    pub(super) async fn server_error<S: Sandbox>(
        &self,
        sandbox: &S,
        error: TransportError,
    ) -> AgentError {
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
}
