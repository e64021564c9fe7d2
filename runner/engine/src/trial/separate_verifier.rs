//! The separate verifier (`[verifier] environment_mode = "separate"`, or a
//! `[verifier.environment]`): the tests run in a container of their own, started from
//! `tests/Dockerfile` or the verifier environment's `docker_image` (Harbor builds it from the
//! tests directory), with only the declared artifacts copied in from the agent's container
//! (`/logs/artifacts` and the task's `artifacts` paths, as Harbor's `upload_artifacts`).
//! Nothing else of the agent's container reaches it, and its network is its own: the
//! verifier environment's baseline, switched to `[verifier] network_mode` when that differs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tasks::config::{Artifact, EnvironmentSection, VerifierEnvironmentMode};
use tasks::{ExceptionType, ExecRequest, Sandbox, Task, shell_quote};

use super::Trial;
use super::phase_network::{self, access, resolved_verifier_mode};
use super::record::{finish_timing, start_timing};
use crate::backend::{Backend, Environment};
use crate::failure::TrialFailure;

/// Harbor's artifacts directory, always copied (its `convention_source`).
const ARTIFACTS_DIR: &str = "/logs/artifacts";
/// The longest copying the artifacts may take.
const COPY_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest removing the verifier's container may take (the job's sweep is the backstop).
const REMOVE_TIMEOUT: Duration = Duration::from_secs(120);

/// True when `task`'s verifier runs in its own environment.
pub(super) fn is_separate(task: &Task) -> bool {
    resolved_verifier_mode(&task.config) == VerifierEnvironmentMode::Separate
}

/// The verifier's environment config: `[verifier.environment]`, else a copy of
/// `[environment]` (Harbor's `resolve_effective_verifier_env_config`).
fn verifier_environment(task: &Task) -> &EnvironmentSection {
    task.config
        .verifier
        .environment
        .as_deref()
        .unwrap_or(&task.config.environment)
}

/// The container paths copied from the agent's environment: `/logs/artifacts` first, then
/// each declared artifact once.
pub fn artifact_sources(task: &Task) -> Vec<String> {
    let mut sources = vec![ARTIFACTS_DIR.to_owned()];
    for artifact in &task.config.artifacts {
        let source = match artifact {
            Artifact::Path(path) => path,
            Artifact::Spec { source, .. } => source,
        };
        let trimmed = source.trim_end_matches('/');
        if !trimmed.is_empty() && !sources.iter().any(|s| s == trimmed) {
            sources.push(trimmed.to_owned());
        }
    }
    sources
}

impl<B: Backend> Trial<B> {
    /// Starts the verifier's own environment, copies the artifacts in, verifies there and
    /// removes it, on every path.
    pub(super) async fn separate_verification(&mut self) -> Result<(), TrialFailure> {
        let agent = self.sandbox()?;
        let task = self.plan.task.clone();
        let network = self.network_plan();
        let baseline = network.verifier_baseline.unwrap_or(network.agent_baseline);
        let venv = verifier_environment(&task);
        let mut spec = self.environment_spec("");
        spec.trial_name = format!("{}__verifier", self.name());
        spec.main.name = "verifier".into();
        spec.main.cpus = venv.cpus;
        spec.main.memory_mb = venv.memory_mb.or(Some(self.limits.memory_mb));
        spec.main.network = access(baseline);
        spec.main.workdir = venv.workdir.clone();
        if task.config.verifier.environment.is_some() {
            spec.main.env = tasks::template::resolve_env(&venv.env).map_err(|e| {
                TrialFailure::new(
                    ExceptionType::EnvironmentStartError,
                    format!("task {}: [verifier.environment] env: {e}", task.name),
                )
            })?;
        }
        spec.sidecars.clear();
        // Nothing of the agent's reaches the verifier, its host mounts included.
        spec.main.mounts.clear();
        spec.compose_task = None;
        spec.network_switchable = network.verifier_phase != baseline;
        spec.gpus = venv.gpus.unwrap_or(0);

        // Progress lines are for the live view; trial.log keeps the build's own output.
        let output = self.observer.output.clone();
        let log: crate::backend::OutputSink =
            std::sync::Arc::new(move |stream: &str, bytes: &[u8]| {
                if stream != crate::backend::IMAGE_PROGRESS_STREAM {
                    output(stream, bytes);
                }
            });
        let started = tokio::time::timeout(
            self.timeouts.environment_build,
            self.ctx
                .backend
                .start_verifier_environment(&task, &spec, &log),
        )
        .await
        .map_err(|_| {
            TrialFailure::new(
                ExceptionType::EnvironmentStartTimeoutError,
                format!(
                    "Verifier environment start timed out after {} seconds",
                    self.timeouts.environment_build.as_secs_f64()
                ),
            )
        })?;
        let environment = started?;
        self.log.line(&format!(
            "started the separate verifier environment: {}",
            environment.describe()
        ));
        let verified = self
            .verify_in(&environment, &agent, baseline, network.verifier_phase)
            .await;
        let what = environment.describe();
        match tokio::time::timeout(REMOVE_TIMEOUT, environment.remove()).await {
            Ok(Ok(())) => self.log.line(&format!("removed {what}")),
            Ok(Err(e)) => self.log.line(&format!(
                "removing {what} failed: {e}; the job's sweep reaps it"
            )),
            Err(_) => self.log.line(&format!(
                "removing {what} took too long; the job's sweep reaps it"
            )),
        }
        verified
    }

    async fn verify_in(
        &mut self,
        environment: &B::Environment,
        agent: &<B::Environment as Environment>::Sandbox,
        baseline: tasks::NetworkMode,
        phase: tasks::NetworkMode,
    ) -> Result<(), TrialFailure> {
        let verifier = environment.main().clone();
        let task = self.plan.task.clone();
        let fail = |message: String| TrialFailure::new(ExceptionType::EnvironmentError, message);
        super::environment::prepare_logs(&verifier, ExceptionType::EnvironmentError).await?;
        let staging =
            std::env::temp_dir().join(format!("runner-artifacts-{}", uuid::Uuid::new_v4()));
        let sources = artifact_sources(&task);
        let copied = tokio::time::timeout(
            COPY_TIMEOUT,
            copy_artifacts(agent, &verifier, &sources, &staging),
        )
        .await;
        let _ = std::fs::remove_dir_all(&staging);
        match copied {
            Ok(Ok(lines)) => {
                for line in lines {
                    self.log.line(&line);
                }
            }
            Ok(Err(e)) => return Err(fail(format!("copying the artifacts to the verifier: {e}"))),
            Err(_) => {
                return Err(fail(format!(
                    "copying the artifacts to the verifier took longer than {} s",
                    COPY_TIMEOUT.as_secs()
                )));
            }
        }
        if phase != baseline {
            phase_network::switch(environment, "verifier", phase).await?;
            self.log.line(&format!(
                "network for the verifier: {} (its environment's baseline {})",
                phase.as_str(),
                baseline.as_str()
            ));
        }
        start_timing(&mut self.result.verifier);
        let deadline = Instant::now()
            .checked_add(self.timeouts.verifier)
            .unwrap_or_else(Instant::now);
        let mut notes = verifiers::VerifyNotes::default();
        let verified = verifiers::verify(&verifier, &task, &self.dir, deadline, &mut notes).await;
        finish_timing(&mut self.result.verifier);
        self.record_notes(notes);
        self.result.verifier_result = Some(verified?.result);
        Ok(())
    }
}

/// Copies each of `sources` that exists from `from` to the same path in `to`, through the host
/// (`staging`): downloads keep only regular files and directories within the trial's download
/// budget, so no link the agent made can point the verifier's upload anywhere. A directory
/// replaces the target directory (Harbor empties it first). Returns lines for `trial.log`.
async fn copy_artifacts<A: Sandbox, V: Sandbox>(
    from: &A,
    to: &V,
    sources: &[String],
    staging: &Path,
) -> Result<Vec<String>, tasks::SandboxError> {
    let mut lines = Vec::new();
    for (index, source) in sources.iter().enumerate() {
        let quoted = shell_quote(source);
        let kind = from
            .exec(ExecRequest::root(format!(
                "if [ -d {quoted} ]; then echo dir; elif [ -f {quoted} ]; then echo file; else echo none; fi"
            )))
            .await?;
        let host = staging.join(index.to_string());
        match kind.stdout.trim() {
            "dir" => {
                from.download_dir(source, &host).await?;
                to.exec(ExecRequest::root(format!(
                    "rm -rf {quoted} && mkdir -p {quoted} && chmod 777 {quoted}"
                )))
                .await?;
                to.upload_dir(&host, source).await?;
                lines.push(format!(
                    "artifact {source}: directory copied to the verifier"
                ));
            }
            "file" => {
                // A fresh directory of root's own, so the download names only this file.
                let made = from
                    .exec(ExecRequest::root(format!(
                        "d=$(mktemp -d) && cp -L -- {quoted} \"$d\"/ && echo \"$d\""
                    )))
                    .await?;
                let temp = made.stdout.trim().to_owned();
                if !made.success() || !temp.starts_with('/') {
                    lines.push(format!(
                        "artifact {source}: could not be read ({})",
                        made.stderr.trim()
                    ));
                    continue;
                }
                let downloaded = from.download_dir(&temp, &host).await;
                from.exec(ExecRequest::root(format!("rm -rf {}", shell_quote(&temp))))
                    .await?;
                downloaded?;
                let parent = parent_dir(source);
                to.upload_dir(&host, &parent).await?;
                lines.push(format!("artifact {source}: file copied to the verifier"));
            }
            _ => lines.push(format!(
                "artifact {source}: not in the agent's environment, nothing copied"
            )),
        }
    }
    Ok(lines)
}

/// The directory holding `path` (`/` for a top-level file).
fn parent_dir(path: &str) -> String {
    let parent = PathBuf::from(path)
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if parent.is_empty() {
        "/".into()
    } else {
        parent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_artifacts_dir_comes_first_and_sources_are_unique() {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in [
            ("instruction.md", "x\n"),
            ("tests/test.sh", "#!/bin/bash\n"),
            ("environment/Dockerfile", "FROM x\n"),
            (
                "task.toml",
                "artifacts = [\"/app/out.txt\", \"/logs/artifacts/\", {source = \"/app/out.txt\"}, {source = \"/data/\"}]\n",
            ),
        ] {
            let file = dir.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        let task = Task::read(dir.path()).unwrap();
        assert_eq!(
            artifact_sources(&task),
            ["/logs/artifacts", "/app/out.txt", "/data"]
        );
        assert_eq!(parent_dir("/app/out.txt"), "/app");
        assert_eq!(parent_dir("/out.txt"), "/");
    }
}
