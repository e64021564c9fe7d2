//! `tasks::Sandbox` over a running trial container.

use std::path::Path;

use engine::ExecObserver;
use tasks::{ExecOutput, ExecRequest, Sandbox, SandboxError, shell_quote};

use super::exec;
use super::{DockerClient, archive};

/// The sandbox agents and verifiers use during one trial.
#[derive(Clone)]
pub struct DockerSandbox {
    client: DockerClient,
    container: String,
    workdir: Option<String>,
    observer: ExecObserver,
}

impl DockerSandbox {
    /// A sandbox over `container`; commands default to `workdir`; `observer` sees their
    /// output and wall time.
    pub fn new(
        client: DockerClient,
        container: String,
        workdir: Option<String>,
        observer: ExecObserver,
    ) -> Self {
        Self {
            client,
            container,
            workdir,
            observer,
        }
    }

    async fn mkdir_as_root(&self, dir: &str) -> Result<(), SandboxError> {
        let quoted = shell_quote(dir);
        let out = self
            .exec(ExecRequest::root(format!("mkdir -p {quoted}")))
            .await?;
        if out.success() {
            Ok(())
        } else {
            Err(SandboxError::new(format!("mkdir {dir}"), out.stderr.trim()))
        }
    }
}

impl Sandbox for DockerSandbox {
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let output = exec::run(
            &self.client,
            &self.container,
            &request,
            self.workdir.as_deref(),
            &self.observer.output,
        )
        .await
        .map_err(|e| SandboxError::new("exec", e))?;
        self.observer.add_exec_time(output.elapsed);
        Ok(output)
    }

    async fn upload_dir(&self, source: &Path, target: &str) -> Result<(), SandboxError> {
        let what = format!("upload {} to {target}", source.display());
        self.mkdir_as_root(target).await?;
        let source = source.to_path_buf();
        let target_owned = target.to_owned();
        let tar = tokio::task::spawn_blocking(move || archive::pack_dir(&source, &target_owned))
            .await
            .map_err(|e| SandboxError::new(&what, e))?
            .map_err(|e| SandboxError::new(&what, e))?;
        archive::upload(&self.client, &self.container, tar, target)
            .await
            .map_err(|e| SandboxError::new(&what, e))
    }

    async fn upload_bytes(
        &self,
        bytes: Vec<u8>,
        target: &str,
        mode: u32,
    ) -> Result<(), SandboxError> {
        let what = format!("upload {target}");
        if let Some((parent, _)) = target.rsplit_once('/')
            && !parent.is_empty()
        {
            self.mkdir_as_root(parent).await?;
        }
        let tar =
            archive::pack_file(&bytes, target, mode).map_err(|e| SandboxError::new(&what, e))?;
        archive::upload(&self.client, &self.container, tar, target)
            .await
            .map_err(|e| SandboxError::new(&what, e))
    }

    async fn download_dir(&self, source: &str, target: &Path) -> Result<(), SandboxError> {
        let skipped = archive::download_dir(&self.client, &self.container, source, target)
            .await
            .map_err(|e| SandboxError::new(format!("download {source}"), e))?;
        for name in skipped {
            (self.observer.output)(
                "runner",
                format!("download {source}: skipped {name} (not a regular file or directory)\n")
                    .as_bytes(),
            );
        }
        Ok(())
    }
}
