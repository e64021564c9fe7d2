//! Errors of the Docker backend.

/// Why an engine could not be reached, with its own chain of causes.
pub type ConnectCause = Box<dyn std::error::Error + Send + Sync>;

/// A connect failure of the engine `DOCKER_HOST` names, said with that name.
#[derive(Debug, thiserror::Error)]
#[error("DOCKER_HOST={host}: {source}")]
pub struct DockerHostUnreachable {
    /// The variable's value.
    pub host: String,
    /// Why it could not be reached.
    #[source]
    pub source: ConnectCause,
}

/// A Docker operation that failed, with what it was for.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// No engine answered. The cause is kept whole: the client library's message is often
    /// generic ("client error (Connect)") and its sources say what really failed
    /// ("Connection refused").
    #[error("cannot reach the Docker engine ({0}); is dockerd running and DOCKER_HOST right?")]
    Connect(#[source] ConnectCause),
    /// An engine named by URL or context (a pool member) could not be reached: the reason is
    /// the engine's own (a refused socket, the TLS error, what ssh printed), and the caller
    /// names the flag that gave the engine, so DOCKER_HOST is not suggested.
    #[error("cannot reach the engine: {0}")]
    EngineUnreachable(#[source] ConnectCause),
    /// An engine API call failed.
    #[error("{operation}: {source}")]
    Api {
        /// What was being done.
        operation: String,
        /// The engine's answer.
        #[source]
        source: bollard::errors::Error,
    },
    /// An image build failed.
    #[error("building the image of task {task} failed: {message}")]
    Build {
        /// The task.
        task: String,
        /// The builder's message.
        message: String,
    },
    /// A prebuilt image is not present and cannot be pulled.
    #[error(
        "task {task} names docker_image {image:?}, which is not present in the engine; build, pull or import it first"
    )]
    MissingImage {
        /// The task.
        task: String,
        /// The image.
        image: String,
    },
    /// A prebuilt image could not be pulled, after every attempt the retry policy allows.
    #[error("pulling {image} failed after {attempts} attempt(s); the registry answered: {answer}")]
    Pull {
        /// The image as the task names it.
        image: String,
        /// Attempts made.
        attempts: u32,
        /// The last answer (the engine relays the registry's).
        answer: String,
    },
    /// A task's `docker_image` does not parse.
    #[error("task {task}: [environment] docker_image {source}")]
    BadReference {
        /// The task.
        task: String,
        /// What is wrong.
        #[source]
        source: crate::image::reference::BadReference,
    },
    /// Registry credentials could not be read.
    #[error("reading registry credentials for {image}: {source}")]
    Auth {
        /// The image being pulled.
        image: String,
        /// What failed.
        #[source]
        source: crate::image::auth::AuthError,
    },
    /// The engine's data root is below the free-space watermark.
    #[error(
        "not {what}: the engine's data root {root} has {free_mb} MB free, below the {min_mb} MB watermark; free space (runner images prune, docker system prune) or lower --min-free-disk-mb",
        root = root.display(),
        free_mb = free / 1_000_000,
        min_mb = min_free / 1_000_000
    )]
    DiskSpace {
        /// The data root.
        root: std::path::PathBuf,
        /// Bytes free.
        free: u64,
        /// The watermark in bytes.
        min_free: u64,
        /// What was not started (`building the image of task x`, `pulling y`).
        what: String,
    },
    /// The verifier jail failed after the tests started, or its trial container is gone.
    #[error("verifier jail: {0}")]
    Jail(String),
    /// A host-side file operation failed.
    #[error("{operation}: {source}")]
    Io {
        /// What was being done.
        operation: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl DockerError {
    /// Wraps a bollard error with the operation it interrupted.
    pub fn api(operation: impl Into<String>, source: bollard::errors::Error) -> Self {
        DockerError::Api {
            operation: operation.into(),
            source,
        }
    }
}

/// What the engine is told: the failure's kind (for the trial's exception type) and message.
impl From<DockerError> for engine::BackendError {
    fn from(error: DockerError) -> Self {
        use engine::BackendErrorKind as Kind;
        let kind = match &error {
            DockerError::Connect(_) | DockerError::EngineUnreachable(_) => Kind::Unreachable,
            DockerError::Build { .. } => Kind::Build,
            DockerError::MissingImage { .. } => Kind::ImageMissing,
            DockerError::Pull { .. }
            | DockerError::BadReference { .. }
            | DockerError::Auth { .. } => Kind::Pull,
            DockerError::DiskSpace { .. } => Kind::DiskSpace,
            DockerError::Api { .. } | DockerError::Io { .. } | DockerError::Jail(_) => {
                Kind::Operation
            }
        };
        engine::BackendError::new(kind, error.to_string())
    }
}
