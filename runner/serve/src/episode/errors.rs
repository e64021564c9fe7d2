//! Why an episode's container could not be readied or moved between networks; their text
//! reaches the client (as `starting the environment: …`) or the step's failure.

use engine::BackendError;
use tasks::SandboxError;

/// The container started but could not be readied for the policy.
#[derive(Debug, thiserror::Error)]
pub(super) enum PrepareError {
    /// Listing the container's processes or asking its working directory failed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Uploading the task's `environment/` files (a prebuilt image's) failed.
    #[error("uploading environment/ to {workdir}: {source}")]
    Upload {
        /// The container directory uploaded to.
        workdir: String,
        /// The sandbox's error.
        #[source]
        source: SandboxError,
    },
    /// The task's `[environment.healthcheck]` did not pass.
    #[error("the task's healthcheck: {0}")]
    Healthcheck(String),
}

/// The container could not be moved to the network a phase needs.
#[derive(Debug, thiserror::Error)]
#[error("switching the network for the {why}: {source}")]
pub(super) struct NetworkSwitchError {
    /// The phase it was for (`verifier`, `step's setup`, ...).
    pub why: String,
    /// The backend's error.
    #[source]
    pub source: BackendError,
}
