//! A trial environment on Docker: one container (the main service).

use engine::{BackendError, BackendErrorKind, Environment, EnvironmentSpec, NetworkAccess};
use tasks::records::StorageEnforcement;

use std::sync::Arc;

use super::container::{ContainerSpec, TrialContainer, limits_host_config, remove_container};
use super::jail::{HELPER, JailSpec};
use super::jail_warm::{JailSlot, Prepared, prestart};
use super::labels::{self, Owner};
use super::removals::Removals;
use super::{DockerClient, DockerSandbox, image};

/// A started trial container and the sandbox over it.
pub struct DockerEnvironment {
    client: DockerClient,
    container: TrialContainer,
    sandbox: DockerSandbox,
    storage: StorageEnforcement,
    jail: Arc<JailSlot>,
    removals: Removals,
}

impl DockerEnvironment {
    /// Creates and starts the container of `spec.main`; a spec with sidecars is refused
    /// before anything is created. The verifier jail is prepared in the background from here
    /// on (see `jail_warm.rs`), so only its order is on the trial's path.
    pub(crate) async fn start(
        client: &DockerClient,
        spec: &EnvironmentSpec,
        owner: &Owner,
        removals: &Removals,
    ) -> Result<DockerEnvironment, BackendError> {
        if let Some(sidecar) = spec.sidecars.first() {
            return Err(BackendError::new(
                BackendErrorKind::Unsupported,
                format!(
                    "the Docker backend does not run sidecar services yet (service {:?} of task {})",
                    sidecar.name, spec.task_name
                ),
            ));
        }
        let main = &spec.main;
        let limits = &spec.limits;
        let container_spec = ContainerSpec {
            name: format!(
                "runner-{}-{}",
                &spec.job_id[..spec.job_id.len().min(8)],
                image::sanitize(&spec.trial_name)
            ),
            image: main.image.clone(),
            job_id: spec.job_id.clone(),
            trial_name: spec.trial_name.clone(),
            task_name: spec.task_name.clone(),
            cpus: main.cpus,
            memory_mb: main.memory_mb,
            memory_swap_mb: Some(limits.memory_swap_mb),
            pids_limit: Some(limits.pids_limit),
            storage_quota_mb: limits.storage_mb,
            network: main.network == NetworkAccess::Public,
            workdir: main.workdir.clone(),
            env: main.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        };
        let container = TrialContainer::start(client, &container_spec, owner)
            .await
            .map_err(|e| BackendError::new(BackendErrorKind::Start, e.to_string()))?;
        let storage = match (limits.storage_mb, container.storage_quota) {
            (None, _) => StorageEnforcement::None,
            (Some(_), true) => StorageEnforcement::Quota,
            (Some(_), false) => StorageEnforcement::Watched,
        };
        let mut jail_labels = labels::for_job(&spec.job_id, owner);
        jail_labels.insert(labels::TRIAL.to_owned(), spec.trial_name.clone());
        jail_labels.insert(labels::TASK.to_owned(), spec.task_name.clone());
        let base = JailSpec {
            trial_id: container.id.clone(),
            trial_name: container.name.clone(),
            image: main.image.clone(),
            env: container_spec.env.clone(),
            default_user: None,
            workdir: main.workdir.clone(),
            labels: jail_labels,
            limits: limits_host_config(
                main.cpus,
                main.memory_mb,
                Some(limits.memory_swap_mb),
                Some(limits.pids_limit),
            ),
        };
        let jail = Arc::new(JailSlot::preparing(tokio::spawn(prepare_jail(
            client.clone(),
            base,
        ))));
        let sandbox = DockerSandbox::new(
            client.clone(),
            container.id.clone(),
            main.workdir.clone(),
            spec.observer.clone(),
            limits.download_cap_bytes,
            removals.clone(),
        )
        .with_jail(jail.clone());
        Ok(DockerEnvironment {
            client: client.clone(),
            sandbox,
            container,
            storage,
            jail,
            removals: removals.clone(),
        })
    }
}

/// Completes the jail's spec with what it must copy from the running container (its default
/// user, and its working directory when the task names none), then starts the jail early. A
/// failed inspection leaves the trial without a jail (recorded as isolation unavailable); a
/// failed early start leaves the verifier to make a fresh jail.
async fn prepare_jail(client: DockerClient, mut spec: JailSpec) -> Prepared {
    let inspected = match client.api().inspect_container(&spec.trial_id, None).await {
        Ok(inspected) => inspected,
        Err(e) => {
            return Prepared {
                spec: None,
                warm: Err(format!("inspecting {}: {e}", spec.trial_name)),
            };
        }
    };
    let config = inspected.config.unwrap_or_default();
    spec.default_user = config.user.filter(|u| !u.is_empty());
    if spec.workdir.is_none() {
        spec.workdir = config.working_dir.filter(|w| !w.is_empty());
    }
    let warm = if HELPER.is_empty() {
        Err("no helper".to_owned())
    } else {
        prestart(&client, &spec).await.map_err(|e| e.to_string())
    };
    Prepared {
        spec: Some(spec),
        warm,
    }
}

impl Environment for DockerEnvironment {
    type Sandbox = DockerSandbox;

    fn main(&self) -> &DockerSandbox {
        &self.sandbox
    }

    fn describe(&self) -> String {
        format!("container {}", self.container.name)
    }

    /// Asks for the removal of the container and of a jail no verification used, and
    /// returns: nothing of the trial depends on it, and the job's end waits for it.
    async fn remove(self) -> Result<(), BackendError> {
        let DockerEnvironment {
            client,
            container,
            jail,
            removals,
            sandbox,
            ..
        } = self;
        let output = sandbox.observer().output.clone();
        removals.track(tokio::spawn(async move {
            // The trial goes first: the jail shares its PID namespace and stops with it.
            let mut ids = vec![container.id.clone()];
            if let Some(unused) = jail.unused().await {
                ids.push(unused);
            }
            for id in ids {
                if let Err(e) = remove_container(&client, &id).await {
                    let text = format!("removing {id} failed: {e}; the job's sweep removes it\n");
                    output("runner", text.as_bytes());
                }
            }
        }));
        Ok(())
    }

    fn storage_enforcement(&self) -> StorageEnforcement {
        self.storage
    }
}
