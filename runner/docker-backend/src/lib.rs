//! The Docker backend, through bollard: images, containers, exec, file transfer, reaping.
//!
//! Everything the runner asks of the engine lives here. [`DockerBackend`] implements the
//! engine's `Backend`: task images pulled or built once per job ([`ImageService`]; a compose
//! task's `services.main` may name the build or image), one main container per trial
//! environment with a compose task's sidecars on a network of its own, driven through
//! [`DockerSandbox`].

mod compose;
mod connect;
mod container;
mod environment;
mod error;
mod facts;
mod gpus;
mod image;
mod jail;
mod labels;
mod network;
mod sandbox;

pub use compose::file::{ComposeError, ComposeFile};
pub use connect::context::{ContextError, context_engine, docker_config_dir};
pub use connect::remote::TlsFiles;
pub use connect::{DockerClient, EngineUrl, EngineUrlError};
pub use container::reap::{reap_dead_owners, remove_job_containers};
pub use container::{ContainerExtra, ContainerSpec, TrialContainer};
pub use environment::DockerEnvironment;
pub use error::DockerError;
pub use facts::{EngineFacts, free_bytes};
pub use image::ledger::{Ledger, LedgerEntry, LedgerOrigin, default_state_dir};
pub use image::planned::{ImageAction, PlannedImage, planned_image};
pub use image::prune::{PruneItem, PruneReport, prune_images};
pub use image::pull::{PullRetryPolicy, is_retryable};
pub use image::reference::ImageRef;
pub use image::{
    DEFAULT_MIN_FREE_DISK_MB, DEFAULT_PULLS_PER_MINUTE, ImagePolicy, ImageService, sanitize,
};
pub use jail::preflight::{JAIL_APPARMOR_ENV, check_jail};
pub use labels::Owner;
pub use sandbox::DockerSandbox;

use std::sync::Arc;

use container::removals::Removals;
use image::build_spec::BuildSpec;
/// The verifier jail's helper, compiled into the tests so its pure parts are unit-tested.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../contain/main.rs"]
mod contain_helper;

use engine::{
    Backend, BackendError, EnvironmentSpec, ImageInfo, ImageRequest, OutputSink, VerifierImage,
};
use tasks::Task;

/// The engine's backend over one Docker engine, labelling what it creates with this process
/// as owner so a later run can reap what a killed one left. Clones share one
/// [`ImageService`], so an image is pulled once however many tasks name it.
#[derive(Clone)]
pub struct DockerBackend {
    client: DockerClient,
    owner: Owner,
    images: Arc<ImageService>,
    removals: Removals,
    /// The network public environments join instead of the default bridge (see
    /// [`DockerBackend::isolate_environments`]).
    public_network: Option<String>,
}

impl DockerBackend {
    /// A backend over `client`, owned by the current process, with the default image policy.
    pub fn new(client: DockerClient) -> Self {
        Self::with_policy(client, ImagePolicy::default())
    }

    /// A backend whose pulls and builds follow `policy`.
    pub fn with_policy(client: DockerClient, policy: ImagePolicy) -> Self {
        Self {
            images: Arc::new(ImageService::new(client.clone(), policy)),
            client,
            owner: Owner::current(),
            removals: Removals::default(),
            public_network: None,
        }
    }

    /// Puts every public environment of job `job_id` on a network of the job's own whose
    /// containers cannot reach each other (a bridge with inter-container traffic off), instead
    /// of the default bridge every container of the engine shares: `runner serve`'s sessions
    /// then cannot reach one another, nor other jobs' containers (bridges are isolated from
    /// each other). The network carries the job's labels, so the job's sweep (and the reaping
    /// of a dead runner's leftovers) removes it. A compose task keeps its own network.
    pub async fn isolate_environments(mut self, job_id: &str) -> Result<Self, DockerError> {
        let name = format!("runner-{}-isolated", &job_id[..job_id.len().min(24)]);
        let labels = labels::for_job(job_id, &self.owner);
        network::create_network(&self.client, &name, labels, network::Bridge::Isolated).await?;
        self.public_network = Some(name);
        Ok(self)
    }

    /// The network public environments join, when not the default bridge.
    pub fn public_network(&self) -> Option<&str> {
        self.public_network.as_deref()
    }

    /// The engine connection (for reaping at start and the second-Ctrl-C sweep).
    pub fn client(&self) -> &DockerClient {
        &self.client
    }
}

impl Backend for DockerBackend {
    type Environment = DockerEnvironment;

    async fn prepare_image(
        &self,
        task: &Task,
        image: &ImageRequest,
        log: &OutputSink,
    ) -> Result<ImageInfo, BackendError> {
        self.images.ensure(task, image, log).await
    }

    async fn start_environment(
        &self,
        spec: &EnvironmentSpec,
    ) -> Result<DockerEnvironment, BackendError> {
        DockerEnvironment::start(
            &self.client,
            &self.images,
            spec,
            &self.owner,
            &self.removals,
            self.public_network.as_deref(),
        )
        .await
    }

    async fn start_verifier_environment(
        &self,
        task: &Task,
        verifier: &VerifierImage,
        spec: &EnvironmentSpec,
        log: &OutputSink,
    ) -> Result<DockerEnvironment, BackendError> {
        // Harbor builds the verifier's environment from its tests directory (its
        // environment_dir) and prefers the environment config's docker_image, never forcing
        // a build.
        if verifier.docker_image.is_none() && !verifier.context.join("Dockerfile").is_file() {
            return Err(BackendError::new(
                engine::BackendErrorKind::Build,
                format!(
                    "task {}: the separate verifier needs {}/Dockerfile or a docker_image in its verifier environment",
                    task.name,
                    verifier
                        .context
                        .strip_prefix(&task.dir)
                        .unwrap_or(&verifier.context)
                        .display()
                ),
            ));
        }
        let image = self
            .images
            .ensure_other(
                task,
                verifier.docker_image.as_deref(),
                &BuildSpec::context(verifier.context.clone()),
                &verifier.name,
                log,
            )
            .await?;
        let mut spec = spec.clone();
        spec.main.image = image.id.clone();
        log(
            "runner",
            format!("verifier image {} ({})\n", image.tag, image.id).as_bytes(),
        );
        DockerEnvironment::start(
            &self.client,
            &self.images,
            &spec,
            &self.owner,
            &self.removals,
            self.public_network.as_deref(),
        )
        .await
    }

    /// Waits for the removals teardowns asked for, then removes whatever else is labelled
    /// with the job (what cancelled starts left), so only that is counted.
    async fn remove_job(&self, job_id: &str) -> Result<usize, BackendError> {
        self.removals.drain().await;
        Ok(remove_job_containers(&self.client, job_id).await?)
    }

    /// The engine host's CPUs and memory, from its info (read once, with the engine's facts).
    async fn capacity(&self) -> Result<engine::EngineCapacity, BackendError> {
        let facts = self.images.facts().await?;
        Ok(engine::EngineCapacity {
            cpus: facts.cpus.map(f64::from),
            memory_mb: facts.memory_bytes.map(|b| b / (1024 * 1024)),
        })
    }

    async fn ping(&self) -> Result<(), BackendError> {
        self.client.ping().await.map_err(BackendError::from)
    }
}
