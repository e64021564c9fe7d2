//! A trial environment on Docker: one container (the main service).

use engine::{BackendError, BackendErrorKind, Environment, EnvironmentSpec, NetworkAccess};
use tasks::records::StorageEnforcement;

use super::container::{ContainerSpec, TrialContainer, limits_host_config};
use super::jail::JailSpec;
use super::labels::{self, Owner};
use super::{DockerClient, DockerSandbox, image};

/// A started trial container and the sandbox over it.
pub struct DockerEnvironment {
    client: DockerClient,
    container: TrialContainer,
    sandbox: DockerSandbox,
    storage: StorageEnforcement,
}

impl DockerEnvironment {
    /// Creates and starts the container of `spec.main`; a spec with sidecars is refused
    /// before anything is created.
    pub(crate) async fn start(
        client: &DockerClient,
        spec: &EnvironmentSpec,
        owner: &Owner,
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
            binds: main
                .mounts
                .iter()
                .map(|m| {
                    let mode = if m.read_only { ":ro" } else { "" };
                    format!("{}:{}{mode}", m.host.display(), m.container)
                })
                .collect(),
        };
        let container = TrialContainer::start(client, &container_spec, owner)
            .await
            .map_err(|e| BackendError::new(BackendErrorKind::Start, e.to_string()))?;
        let storage = match (limits.storage_mb, container.storage_quota) {
            (None, _) => StorageEnforcement::None,
            (Some(_), true) => StorageEnforcement::Quota,
            (Some(_), false) => StorageEnforcement::Watched,
        };
        let mut environment = DockerEnvironment {
            client: client.clone(),
            sandbox: DockerSandbox::new(
                client.clone(),
                container.id.clone(),
                main.workdir.clone(),
                spec.observer.clone(),
                limits.download_cap_bytes,
            ),
            container,
            storage,
        };
        // What the verifier jail must copy from the running container (its default user); a failure here leaves the environment without a jail, which the
        // trial records as isolation unavailable.
        if let Ok(inspected) = client
            .api()
            .inspect_container(&environment.container.id, None)
            .await
        {
            let config = inspected.config.unwrap_or_default();
            let mut jail_labels = labels::for_job(&spec.job_id, owner);
            jail_labels.insert(labels::TRIAL.to_owned(), spec.trial_name.clone());
            jail_labels.insert(labels::TASK.to_owned(), spec.task_name.clone());
            let jail = JailSpec {
                trial_id: environment.container.id.clone(),
                trial_name: environment.container.name.clone(),
                image: main.image.clone(),
                env: container_spec.env.clone(),
                default_user: config.user.filter(|u| !u.is_empty()),
                workdir: main
                    .workdir
                    .clone()
                    .or(config.working_dir.filter(|w| !w.is_empty())),
                labels: jail_labels,
                limits: limits_host_config(
                    main.cpus,
                    main.memory_mb,
                    Some(limits.memory_swap_mb),
                    Some(limits.pids_limit),
                ),
            };
            environment.sandbox = environment.sandbox.with_jail(jail);
        }
        Ok(environment)
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

    async fn remove(self) -> Result<(), BackendError> {
        Ok(self.container.remove(&self.client).await?)
    }

    fn storage_enforcement(&self) -> StorageEnforcement {
        self.storage
    }
}
