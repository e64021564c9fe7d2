//! Files the installed agent writes under `<trial>/agent/`, and the commands it runs in the
//! container: their placeholders, and the root steps that must succeed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use tasks::records::AgentContext;
use tasks::{ExecOutput, ExecRequest, Sandbox};

use crate::agent::{AgentError, AgentErrorKind};

/// `<trial>/agent`.
pub fn agent_dir(trial_dir: &Path) -> PathBuf {
    trial_dir.join("agent")
}

/// Writes `bytes` to `<trial>/agent/<rel>` atomically; failures are sandbox-level errors
/// because the trial's record would be incomplete.
pub fn write(trial_dir: &Path, rel: &str, bytes: &[u8]) -> Result<(), AgentError> {
    let path = agent_dir(trial_dir).join(rel);
    tasks::atomic::write_atomic(&path, bytes).map_err(|e| {
        AgentError::new(
            AgentErrorKind::Sandbox,
            format!("writing {}: {e}", path.display()),
        )
    })
}

/// Records why no trajectory was written in `agent/trajectory-error.txt` (best effort: the
/// error itself is what the trial records) and returns the error saying `shown`.
pub fn trajectory_error(trial_dir: &Path, message: &str, shown: String) -> AgentError {
    let _ = write(
        trial_dir,
        "trajectory-error.txt",
        format!("{message}\n").as_bytes(),
    );
    AgentError::new(AgentErrorKind::Trajectory, shown)
}

/// Saves one install command and its outputs as `setup/command-<i>/{command.txt, stdout.txt,
/// stderr.txt, return-code.txt}` (return code `timeout` when the deadline killed it).
pub fn save_command(
    trial_dir: &Path,
    index: usize,
    command: &str,
    output: &ExecOutput,
) -> Result<(), AgentError> {
    let dir = format!("setup/command-{index}");
    write(trial_dir, &format!("{dir}/command.txt"), command.as_bytes())?;
    write(
        trial_dir,
        &format!("{dir}/stdout.txt"),
        output.stdout.as_bytes(),
    )?;
    write(
        trial_dir,
        &format!("{dir}/stderr.txt"),
        output.stderr.as_bytes(),
    )?;
    let code = match (output.timed_out, output.exit_code) {
        (true, _) => "timeout".to_owned(),
        (false, Some(code)) => code.to_string(),
        (false, None) => "none".to_owned(),
    };
    write(
        trial_dir,
        &format!("{dir}/return-code.txt"),
        format!("{code}\n").as_bytes(),
    )
}

/// Runs the setup step `command` in the container as root, killed after `timeout`. A non-zero
/// exit is an error of `kind` saying that `what` failed, with the command's stderr.
pub async fn run_root_step<S: Sandbox>(
    sandbox: &S,
    command: String,
    timeout: Duration,
    kind: AgentErrorKind,
    what: &str,
) -> Result<ExecOutput, AgentError> {
    let out = sandbox
        .exec(ExecRequest::root(command).timeout(timeout))
        .await?;
    if out.success() {
        Ok(out)
    } else {
        Err(AgentError::new(
            kind,
            format!("{what} failed: {}", out.stderr.trim()),
        ))
    }
}

/// Runs the install `commands` (already filled in) as root in order, each killed at
/// `deadline`, saving each one's output under `agent/setup/command-<i>/`. The first that fails
/// or times out fails setup, naming it.
pub async fn run_install_commands<S: Sandbox>(
    sandbox: &S,
    trial_dir: &Path,
    commands: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&str>,
    deadline: Instant,
) -> Result<(), AgentError> {
    for (index, full) in commands.iter().enumerate() {
        let command = brief(full);
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(AgentError::new(
                AgentErrorKind::SetupTimeout,
                format!(
                    "agent setup deadline reached before install command {index} (`{command}`)"
                ),
            ));
        }
        let mut request = ExecRequest::root(format!("set -o pipefail; {full}"))
            .envs(env)
            .timeout(remaining);
        request.cwd = cwd.map(str::to_owned);
        request
            .env
            .insert("DEBIAN_FRONTEND".into(), "noninteractive".into());
        let out = sandbox.exec(request).await?;
        save_command(trial_dir, index, full, &out)?;
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

/// How a failure message names an install command: its first non-blank line, trimmed and cut
/// at 80 characters, with `…` when there is more (the whole command is in
/// `agent/setup/command-<i>/command.txt`).
fn brief(command: &str) -> String {
    const MOST: usize = 80;
    let mut lines = command.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let mut text: String = first.chars().take(MOST).collect();
    if text.len() < first.len() || lines.next().is_some() {
        text.push('…');
    }
    text
}

/// Runs a `version_command` (already filled in) as `user`; its first non-empty stdout line is
/// the version. Failing or printing nothing fails setup; no command is no version.
pub async fn learn_version<S: Sandbox>(
    sandbox: &S,
    command: Option<&str>,
    user: Option<&str>,
    env: &BTreeMap<String, String>,
    cwd: Option<&str>,
) -> Result<Option<String>, AgentError> {
    let Some(command) = command else {
        return Ok(None);
    };
    let mut request = ExecRequest::new(command)
        .maybe_user(user)
        .envs(env)
        .timeout(Duration::from_secs(60));
    request.cwd = cwd.map(str::to_owned);
    let out = sandbox.exec(request).await?;
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

/// Validates `value` (converted from the trace `file`) and writes it as
/// `agent/trajectory.json`; returns its token counts. An invalid trajectory is `fail`'s error.
pub fn save_trajectory(
    trial_dir: &Path,
    file: &str,
    value: &Value,
    fail: impl Fn(String) -> AgentError,
) -> Result<Option<AgentContext>, AgentError> {
    super::trajectory::validate(value).map_err(|e| {
        fail(format!(
            "the trajectory from agent/traces/{file} is not valid ATIF: {e}"
        ))
    })?;
    let path = agent_dir(trial_dir).join("trajectory.json");
    tasks::atomic::write_json_atomic(&path, value).map_err(|e| {
        AgentError::new(
            AgentErrorKind::Sandbox,
            format!("writing {}: {e}", path.display()),
        )
    })?;
    Ok(super::trajectory::context_from_trajectory(value))
}

/// Replaces `{source_dir}`, `{port}` and `{workspace_root}` in a configured command.
pub fn fill_placeholders(
    command: &str,
    source_dir: &str,
    port: u16,
    workspace_root: Option<&str>,
) -> String {
    let mut out = command
        .replace("{source_dir}", source_dir)
        .replace("{port}", &port.to_string());
    if let Some(root) = workspace_root {
        out = out.replace("{workspace_root}", root);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_names_an_install_command_by_its_first_line() {
        assert_eq!(brief("pip install x"), "pip install x");
        assert_eq!(
            brief(
                "\n    if ! python3 -c 'import ensurepip'; then\n      apt-get install -y python3-venv\n    fi\n"
            ),
            "if ! python3 -c 'import ensurepip'; then…"
        );
        let long = "x".repeat(100);
        assert_eq!(brief(&long), format!("{}…", "x".repeat(80)));
        assert_eq!(brief("  \n "), "");
    }

    #[test]
    fn placeholders() {
        assert_eq!(
            fill_placeholders(
                "x {source_dir} {port} {workspace_root}",
                "/s",
                9,
                Some("/w")
            ),
            "x /s 9 /w"
        );
    }
}
