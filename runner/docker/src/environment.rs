//! A trial environment on Docker: one container (the main service).

use engine::{BackendError, BackendErrorKind, Environment, EnvironmentSpec, NetworkAccess};

use super::container::{ContainerSpec, TrialContainer};
use super::labels::Owner;
use super::{DockerClient, DockerSandbox, image};

/// A started trial container and the sandbox over it.
pub struct DockerEnvironment {
    client: DockerClient,
    container: TrialContainer,
    sandbox: DockerSandbox,
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
            network: main.network == NetworkAccess::Public,
            workdir: main.workdir.clone(),
            env: main.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        };
        let container = TrialContainer::start(client, &container_spec, owner)
            .await
            .map_err(|e| BackendError::new(BackendErrorKind::Start, e.to_string()))?;
        let sandbox = DockerSandbox::new(
            client.clone(),
            container.id.clone(),
            main.workdir.clone(),
            spec.observer.clone(),
        );
        Ok(DockerEnvironment {
            client: client.clone(),
            container,
            sandbox,
        })
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
}
