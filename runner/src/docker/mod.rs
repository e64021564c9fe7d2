//! The Docker backend, through bollard: images, containers, exec, file transfer, reaping.
//!
//! Everything the runner asks of the engine lives here, behind [`DockerClient`]; the trial
//! lifecycle only sees [`DockerSandbox`] through the `tasks::Sandbox` trait.

mod archive;
mod container;
mod error;
mod exec;
mod image;
mod labels;
mod reap;
mod sandbox;

pub use container::{ContainerSpec, TrialContainer};
pub use error::DockerError;
pub use exec::OutputSink;
pub use image::{ImageInfo, ensure_task_image, sanitize};
pub use labels::Owner;
pub use reap::{reap_dead_owners, remove_job_containers};
pub use sandbox::DockerSandbox;

use bollard::Docker;

/// A connected Docker engine.
#[derive(Clone)]
pub struct DockerClient {
    docker: Docker,
}

impl DockerClient {
    /// Connects through `DOCKER_HOST` or the default socket and checks the engine answers.
    pub async fn connect() -> Result<DockerClient, DockerError> {
        let docker =
            Docker::connect_with_defaults().map_err(|e| DockerError::Connect(e.to_string()))?;
        // bollard's request timeout bounds only the time to response headers; long operations
        // carry their own deadlines. Uploads of big trees need the headroom.
        let docker = docker.with_timeout(std::time::Duration::from_secs(600));
        docker
            .ping()
            .await
            .map_err(|e| DockerError::Connect(e.to_string()))?;
        Ok(DockerClient { docker })
    }

    /// The bollard handle.
    pub(crate) fn api(&self) -> &Docker {
        &self.docker
    }
}
