//! Why a session could not start or go on: the errors the server answers with.

use std::path::PathBuf;

/// What went wrong starting (or recording) an episode; its text is what the client reads in
/// the WebSocket error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The reset named no task of the dataset, or an ambiguous one.
    #[error("{0}")]
    UnknownTask(String),
    /// The task is not one `runner serve` can offer (a network allowlist).
    #[error("{0}")]
    Unservable(String),
    /// The task's `[environment].env` could not be resolved.
    #[error("task {task}: [environment].env: {message}")]
    TaskEnv {
        /// The task.
        task: String,
        /// Why.
        message: String,
    },
    /// The task's image could not be prepared (pulled or built).
    #[error("preparing the image of {task}: {source}")]
    Image {
        /// The task.
        task: String,
        /// The backend's error.
        #[source]
        source: engine::BackendError,
    },
    /// The episode's environment did not start, or its first commands failed.
    #[error("starting the environment: {0}")]
    Environment(String),
    /// The environment did not start within the task's build timeout.
    #[error("the environment did not start within {0} s")]
    StartTimeout(u64),
    /// The episode's record could not be written.
    #[error("{path}: {source}")]
    Record {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}
