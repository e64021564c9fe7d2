//! `tasks::Sandbox` over a running trial container.

use std::path::Path;
use std::sync::Arc;

use engine::ExecObserver;
use tasks::isolation::{IsolatedVerifyOutcome, IsolatedVerifyRequest};
use tasks::{ExecOutput, ExecRequest, Sandbox, SandboxError, shell_quote};

use crate::connect::DockerClient;
use crate::container::archive::{self, DownloadBudget};
use crate::container::exec;
use crate::container::exec::Shell;
use crate::container::layer_size::LayerMeter;
use crate::container::removals::Removals;
use crate::jail;
use crate::jail::warm::JailSlot;

/// The sandbox agents and verifiers use during one trial.
#[derive(Clone)]
pub struct DockerSandbox {
    client: DockerClient,
    container: String,
    workdir: Option<String>,
    observer: ExecObserver,
    budget: Arc<DownloadBudget>,
    verifier_budget: Arc<DownloadBudget>,
    jail: Option<Arc<JailSlot>>,
    removals: Removals,
    shell: Shell,
    /// Measures the container's writable layer for the `storage_mb` watch.
    layer: Arc<LayerMeter>,
}

/// The verifier's outputs have a budget of their own (at most this, or the trial's cap when
/// smaller), so an agent that fills its logs cannot keep the reward from being brought back.
const VERIFIER_CAP_BYTES: u64 = 256 << 20;
/// The directory whose downloads count against the verifier's budget.
const VERIFIER_DIR: &str = "/logs/verifier";

impl DockerSandbox {
    /// A sandbox over `container`; commands default to `workdir`; `observer` sees their
    /// output and wall time; downloads share a budget of `download_cap_bytes` and
    /// `download_cap_entries`, except the verifier's outputs, which have their own. It cannot
    /// isolate a verifier (see [`DockerSandbox::with_jail`]).
    pub(crate) fn new(
        client: DockerClient,
        container: String,
        workdir: Option<String>,
        observer: ExecObserver,
        caps: (u64, u64),
        removals: Removals,
    ) -> Self {
        let (download_cap_bytes, download_cap_entries) = caps;
        Self {
            workdir,
            observer,
            budget: Arc::new(DownloadBudget::with_entries(
                download_cap_bytes,
                download_cap_entries,
            )),
            verifier_budget: Arc::new(DownloadBudget::with_entries(
                download_cap_bytes.min(VERIFIER_CAP_BYTES),
                download_cap_entries,
            )),
            jail: None,
            removals,
            shell: Shell::Bash,
            layer: Arc::new(LayerMeter::new(client.clone(), container.clone())),
            client,
            container,
        }
    }

    /// A sandbox over the compose sidecar `container` of the same trial: commands run with
    /// `sh` (see [`Shell::Posix`]) in the image's directory, no jail, and downloads count
    /// against this sandbox's budgets.
    pub(crate) fn for_sidecar(&self, container: String) -> Self {
        Self {
            layer: Arc::new(LayerMeter::new(self.client.clone(), container.clone())),
            container,
            workdir: None,
            jail: None,
            shell: Shell::Posix,
            ..self.clone()
        }
    }

    /// What sees this sandbox's commands (and the trial's log).
    pub(crate) fn observer(&self) -> &ExecObserver {
        &self.observer
    }

    /// The same sandbox, able to run the verifier in the jail `slot` prepares.
    pub(crate) fn with_jail(mut self, slot: Arc<JailSlot>) -> Self {
        self.jail = Some(slot);
        self
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
            (self.workdir.as_deref(), self.shell),
            &self.observer.output,
        )
        .await
        .map_err(|e| SandboxError::new("exec", e))?;
        if !request.bookkeeping {
            self.observer.add_exec_time(output.elapsed);
        }
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
        let budget = if source.trim_end_matches('/') == VERIFIER_DIR {
            self.verifier_budget.clone()
        } else {
            self.budget.clone()
        };
        let report = archive::download_dir(
            &self.client,
            &self.container,
            source,
            target,
            budget.clone(),
        )
        .await
        .map_err(|e| SandboxError::new(format!("download {source}"), e))?;
        let say = |text: String| (self.observer.output)("runner", text.as_bytes());
        for name in report.skipped {
            say(format!(
                "download {source}: skipped {name} (not a regular file or directory)\n"
            ));
        }
        let shown = target
            .file_name()
            .map(|n| Path::new(n).to_path_buf())
            .unwrap_or_default();
        for name in report.truncated {
            say(format!(
                "download {source}: cut {name} at the trial's download cap of {} bytes; the rest was not downloaded\n",
                budget.cap()
            ));
            self.observer
                .record_truncation(shown.join(&name).display().to_string(), budget.cap());
        }
        if report.entries_capped {
            say(format!(
                "download {source}: stopped at the trial's cap of {} entries (files, directories, links); the rest was not downloaded\n",
                budget.entry_cap()
            ));
            self.observer.record_entry_cap(
                shown.display().to_string(),
                budget.cap(),
                budget.entry_cap(),
            );
        }
        Ok(())
    }

    async fn disk_usage(&self) -> Result<Option<u64>, SandboxError> {
        self.layer
            .measure()
            .await
            .map_err(|e| SandboxError::new("measuring disk usage", e))
    }

    async fn verify_isolated(
        &self,
        request: IsolatedVerifyRequest,
    ) -> Result<IsolatedVerifyOutcome, SandboxError> {
        let unavailable = || {
            Ok(IsolatedVerifyOutcome::Unsupported(
                "this sandbox has no verifier jail".into(),
            ))
        };
        let Some(slot) = &self.jail else {
            return unavailable();
        };
        let waited = std::time::Instant::now();
        let (spec, warm) = slot.take().await;
        if matches!(warm, Some(Ok(_))) {
            let text = format!(
                "verifier jail started early; waited {:.3}s for it\n",
                waited.elapsed().as_secs_f64()
            );
            (self.observer.output)("runner", text.as_bytes());
        }
        let Some(spec) = spec else {
            return unavailable();
        };
        let warm = match warm {
            Some(Ok(warm)) => Some(warm),
            Some(Err(why)) => {
                let text =
                    format!("the verifier jail was not started early ({why}); starting it now\n");
                (self.observer.output)("runner", text.as_bytes());
                None
            }
            None => None,
        };
        let (tests_done, tests_over) = tokio::sync::oneshot::channel();
        let verified = jail::verify(
            &self.client,
            &spec,
            warm,
            &request,
            jail::TrialSide {
                container: &self.container,
                budget: self.verifier_budget.clone(),
                observer: &self.observer,
                removals: &self.removals,
            },
            request.then_download.is_some().then_some(tests_done),
        );
        // Once the tests are over, the trial's directory comes back beside the jail's results
        // (nothing to download when the helper found it empty).
        let brought_back = async {
            match (&request.then_download, tests_over.await) {
                (Some((source, target)), Ok(empty)) => {
                    if empty && source == jail::CHECKED_EMPTY {
                        std::fs::create_dir_all(target).is_ok()
                    } else {
                        self.download_dir(source, target).await.is_ok()
                    }
                }
                // The jail did not run to its end: the trial's collection downloads it later.
                _ => false,
            }
        };
        let (verified, brought_back) = tokio::join!(verified, brought_back);
        let mut outcome = verified.map_err(|e| SandboxError::new("run the verifier jail", e))?;
        if let IsolatedVerifyOutcome::Ran(run) = &mut outcome {
            run.then_downloaded = brought_back;
        }
        Ok(outcome)
    }
}
