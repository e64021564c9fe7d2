//! The sandbox trait: what agents and verifiers may do inside a trial's container.
//!
//! The runner implements it over Docker; agents and verifiers only see this trait, so their
//! logic stays testable and backend-agnostic.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use crate::isolation::{IsolatedVerifyOutcome, IsolatedVerifyRequest};

/// One command to run inside the sandbox through `bash -c`.
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    /// The script given to `bash -c`.
    pub command: String,
    /// The user to run as; `None` is the container's default user.
    pub user: Option<String>,
    /// The working directory; `None` is the task's workdir.
    pub cwd: Option<String>,
    /// Extra environment, on top of the task's `[environment].env`.
    pub env: BTreeMap<String, String>,
    /// A deadline after which the command is killed (inside the container, not just abandoned).
    pub timeout: Option<Duration>,
    /// The runner's own bookkeeping (making directories, probing paths, listing outputs), not
    /// the task's, agent's or verifier's work: its time counts as the runner's overhead.
    pub bookkeeping: bool,
}

impl ExecRequest {
    /// A request for `command` with every other field at its default.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
    }

    /// A request for `command` run as root: the setup steps (creating directories, unpacking,
    /// installing, reading the server's files) that the task's agent user may not be allowed to
    /// do.
    pub fn root(command: impl Into<String>) -> Self {
        Self::new(command).user("root")
    }

    /// A root command of the runner's own (the `bookkeeping` field): its time is the
    /// runner's, never counted as time inside the agent's or verifier's commands.
    pub fn runner_own(command: impl Into<String>) -> Self {
        Self::root(command).bookkeeping()
    }

    /// Marks the command as the runner's own bookkeeping (see the field).
    pub fn bookkeeping(mut self) -> Self {
        self.bookkeeping = true;
        self
    }

    /// Runs as `user`.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Runs as `user` when one is given.
    pub fn maybe_user(mut self, user: Option<&str>) -> Self {
        self.user = user.map(str::to_owned);
        self
    }

    /// Kills the command after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Adds environment variables.
    pub fn envs(mut self, env: &BTreeMap<String, String>) -> Self {
        self.env
            .extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        self
    }
}

/// What a finished command produced.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    /// The exit code; `None` when the command was killed at its deadline.
    pub exit_code: Option<i64>,
    /// Captured standard output (lossy UTF-8).
    pub stdout: String,
    /// Captured standard error (lossy UTF-8).
    pub stderr: String,
    /// True when the deadline killed the command.
    pub timed_out: bool,
    /// Wall time the command took.
    pub elapsed: Duration,
}

impl ExecOutput {
    /// True when the command ran to the end and exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// The last line of stdout, trimmed: where a script that prints progress first reports
    /// its answer (a path it made, a root it found); empty when there is no output.
    pub fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or_default().trim()
    }
}

/// A sandbox failure: the backend could not do what was asked (not a command's non-zero exit).
#[derive(Debug, thiserror::Error)]
#[error("{operation}: {message}")]
pub struct SandboxError {
    /// What was attempted, e.g. `upload /tests`.
    pub operation: String,
    /// Why it failed.
    pub message: String,
}

impl SandboxError {
    /// A new error for `operation`.
    pub fn new(operation: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self {
            operation: operation.into(),
            message: message.to_string(),
        }
    }
}

/// Single-quotes `text` as one bash word, so a path or value with spaces, quotes or `$` reaches
/// the command unchanged: every `'` becomes `'\''` (close the quote, an escaped quote, reopen).
/// Commands given to [`Sandbox::exec`] run through `bash -c`, so every backend and every agent
/// building such a command quotes with this one function.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Operations on one trial's running container.
pub trait Sandbox: Send + Sync {
    /// Runs a command and waits for it (or its deadline).
    fn exec(
        &self,
        request: ExecRequest,
    ) -> impl Future<Output = Result<ExecOutput, SandboxError>> + Send;

    /// Copies the contents of the host directory `source` into the container directory `target`
    /// (created if missing), like `cp -r source/. target`.
    fn upload_dir(
        &self,
        source: &Path,
        target: &str,
    ) -> impl Future<Output = Result<(), SandboxError>> + Send;

    /// Writes `bytes` to the container file `target` with `mode`, creating parent directories.
    fn upload_bytes(
        &self,
        bytes: Vec<u8>,
        target: &str,
        mode: u32,
    ) -> impl Future<Output = Result<(), SandboxError>> + Send;

    /// Copies the contents of the container directory `source` into the host directory `target`.
    fn download_dir(
        &self,
        source: &str,
        target: &Path,
    ) -> impl Future<Output = Result<(), SandboxError>> + Send;

    /// Bytes written to the sandbox's filesystem so far (its writable layer), or `None` when
    /// the sandbox cannot tell (the default).
    fn disk_usage(&self) -> impl Future<Output = Result<Option<u64>, SandboxError>> + Send {
        async { Ok(None) }
    }

    /// Runs the task's tests so that no process left in the sandbox can write what they read
    /// or write (`/tests`, `/logs/verifier`), with the processes left listed. A sandbox that
    /// has no isolation answers [`IsolatedVerifyOutcome::Unsupported`], which is the default.
    fn verify_isolated(
        &self,
        request: IsolatedVerifyRequest,
    ) -> impl Future<Output = Result<IsolatedVerifyOutcome, SandboxError>> + Send {
        let _ = request;
        async {
            Ok(IsolatedVerifyOutcome::Unsupported(
                "this sandbox cannot run the verifier isolated".into(),
            ))
        }
    }
}

/// A shared sandbox is a sandbox: backends hand out clones of one handle per service.
impl<S: Sandbox + ?Sized> Sandbox for std::sync::Arc<S> {
    fn exec(
        &self,
        request: ExecRequest,
    ) -> impl Future<Output = Result<ExecOutput, SandboxError>> + Send {
        (**self).exec(request)
    }

    fn upload_dir(
        &self,
        source: &Path,
        target: &str,
    ) -> impl Future<Output = Result<(), SandboxError>> + Send {
        (**self).upload_dir(source, target)
    }

    fn upload_bytes(
        &self,
        bytes: Vec<u8>,
        target: &str,
        mode: u32,
    ) -> impl Future<Output = Result<(), SandboxError>> + Send {
        (**self).upload_bytes(bytes, target, mode)
    }

    fn download_dir(
        &self,
        source: &str,
        target: &Path,
    ) -> impl Future<Output = Result<(), SandboxError>> + Send {
        (**self).download_dir(source, target)
    }

    fn disk_usage(&self) -> impl Future<Output = Result<Option<u64>, SandboxError>> + Send {
        (**self).disk_usage()
    }

    fn verify_isolated(
        &self,
        request: IsolatedVerifyRequest,
    ) -> impl Future<Output = Result<IsolatedVerifyOutcome, SandboxError>> + Send {
        (**self).verify_isolated(request)
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn shell_quote_survives_bash() {
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
        let tricky = "it's $HOME `x` \"y\" \\ ;|&";
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("printf %s {}", shell_quote(tricky)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), tricky);
    }
}
