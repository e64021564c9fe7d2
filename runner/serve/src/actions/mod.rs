//! The policy's actions on an episode's container but `evaluate` and `close`: a blocking
//! `exec` (then the sweep of what it left running: `exec.rs`), the background processes
//! (`exec` with `block = false`, `write`, `view`, `wait`, `kill`: `background.rs`) and
//! `write_file` (`write_file.rs`). They are operations on a sandbox as the policy's user and
//! do not depend on the episode's lifecycle (its start, steps, verification and removal, the
//! trial's phases: `episode/`), which holds a [`Policy`] and hands it each of these actions.

use std::collections::BTreeMap;
use std::time::Duration;

use tasks::{ExecOutput, ExecRequest, Sandbox, SandboxError};

use crate::config::ServeConfig;
use crate::protocol::{Action, ActionKind, Observation};
use crate::scripts;

mod background;
mod exec;
mod write_file;

/// How long the sweep of the policy's processes may take.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(30);

/// The sweep ([`scripts::kill_policy_processes`]): kills every process in the container but
/// PID 1, the process groups `keep` (the policy's background processes) and the processes
/// `own` (the container's own); prints how many it killed. The policy's sweeps and the
/// storage watch's last one are this request.
pub fn sweep_request(keep: &[u32], own: &[u32]) -> ExecRequest {
    ExecRequest::runner_own(scripts::kill_policy_processes(keep, own)).timeout(SWEEP_TIMEOUT)
}

/// A background process the policy started (`exec` with `block = false`).
#[derive(Debug, Clone, Copy)]
struct Background {
    pgid: u32,
    offset: u64,
}

/// The container stopped answering.
#[derive(Debug)]
pub struct Broken(pub String);

impl From<SandboxError> for Broken {
    fn from(e: SandboxError) -> Self {
        Broken(e.to_string())
    }
}

/// The policy's side of one container: who it runs as, where, under which caps, and the
/// processes it started and those it must spare.
pub struct Policy<S> {
    sandbox: S,
    /// The user the policy's commands run as (the task's, or the current step's).
    user: Option<String>,
    /// The working directory (`write_file` may write under it).
    workdir: String,
    exec_timeout: Duration,
    max_output: usize,
    background: BTreeMap<String, Background>,
    /// The container's own processes (its keep-alive, what the task started), which sweeps
    /// spare.
    own_pids: Vec<u32>,
}

impl<S: Sandbox> Policy<S> {
    /// The policy of `sandbox`, running as `user` in `workdir` (empty: found by
    /// [`Self::find_workdir`]) under `config`'s caps.
    pub fn new(sandbox: S, user: Option<String>, workdir: String, config: &ServeConfig) -> Self {
        Self {
            sandbox,
            user,
            workdir,
            exec_timeout: config.exec_timeout,
            max_output: config.max_output_bytes,
            background: BTreeMap::new(),
            own_pids: Vec::new(),
        }
    }

    /// The container.
    pub fn sandbox(&self) -> &S {
        &self.sandbox
    }

    /// The policy runs as `user` from now on (a step's own user).
    pub fn set_user(&mut self, user: Option<String>) {
        self.user = user;
    }

    /// The container's processes the sweeps spare.
    pub fn own_pids(&self) -> &[u32] {
        &self.own_pids
    }

    /// The working directory: the task's, else the container's as the policy sees it (`/`
    /// when it says none).
    pub async fn find_workdir(&mut self) -> Result<&str, SandboxError> {
        if self.workdir.is_empty() {
            let pwd = self
                .sandbox
                .exec(
                    ExecRequest::new("pwd")
                        .maybe_user(self.user.as_deref())
                        .bookkeeping(),
                )
                .await?;
            self.workdir = pwd.stdout.trim().to_owned();
            if self.workdir.is_empty() {
                self.workdir = "/".into();
            }
        }
        Ok(&self.workdir)
    }

    /// Takes the container's processes now (but PID 1 and the listing's own) as its own,
    /// which sweeps spare: what runs before the policy's first action is the task's.
    pub async fn spare_running_processes(&mut self) -> Result<(), SandboxError> {
        let listing = self
            .sandbox
            .exec(ExecRequest::runner_own(scripts::list_processes()).timeout(SWEEP_TIMEOUT))
            .await?;
        self.own_pids = listing
            .stdout
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        Ok(())
    }

    /// Carries out one action of kind `kind` (neither `evaluate` nor `close`, the episode's
    /// own) into `obs`.
    pub async fn act(
        &mut self,
        kind: ActionKind,
        action: &Action,
        obs: Observation,
    ) -> Result<Observation, Broken> {
        match kind {
            ActionKind::Exec if action.block => self.exec(action, obs).await,
            ActionKind::Exec => self.bg_start(action, obs).await,
            ActionKind::Write => self.bg_write(action, obs).await,
            ActionKind::View => self.bg_view(action, obs, 0.0).await,
            ActionKind::Wait => {
                let seconds = action
                    .wait_seconds
                    .unwrap_or(0.0)
                    .clamp(0.0, self.exec_timeout.as_secs_f64());
                self.bg_view(action, obs, seconds).await
            }
            ActionKind::Kill => self.bg_kill(action, obs).await,
            ActionKind::WriteFile => self.write_file(action, obs).await,
            // The episode's own, never handed here.
            ActionKind::Evaluate | ActionKind::Close => Ok(obs),
        }
    }

    /// Kills every process of the policy, its background processes too (before a
    /// verification); returns how many the sweep found.
    pub async fn stop_all(&mut self) -> Result<u64, Broken> {
        for (_, bg) in std::mem::take(&mut self.background) {
            let _ = self
                .sandbox
                .exec(ExecRequest::runner_own(scripts::bg_kill(bg.pgid)))
                .await;
        }
        self.sweep().await
    }

    /// Kills every process the policy left, but its background processes; returns how many.
    async fn sweep(&self) -> Result<u64, Broken> {
        let keep: Vec<u32> = self.background.values().map(|b| b.pgid).collect();
        let request = sweep_request(&keep, &self.own_pids);
        let mut last = String::new();
        // A fork bomb can leave the container without a free pid for a moment.
        for attempt in 0..5u64 {
            match self.sandbox.exec(request.clone()).await {
                Ok(out) if out.success() => return Ok(out.last_line().parse().unwrap_or(0)),
                Ok(out) => last = format!("exit {:?}: {}", out.exit_code, out.stderr.trim()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
        }
        Err(Broken(format!(
            "could not kill the policy's processes ({last})"
        )))
    }

    async fn run(&self, request: ExecRequest) -> Result<ExecOutput, Broken> {
        self.sandbox.exec(request).await.map_err(Broken::from)
    }

    fn as_policy(&self, command: String) -> ExecRequest {
        ExecRequest::new(command)
            .maybe_user(self.user.as_deref())
            .timeout(self.exec_timeout)
    }
}
