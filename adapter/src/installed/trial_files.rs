//! Files the installed agent writes under `<trial>/agent/`, and the commands it runs in the
//! container: their placeholders, and the root steps that must succeed.

use std::path::{Path, PathBuf};
use std::time::Duration;

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
