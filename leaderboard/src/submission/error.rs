//! Why a submission could not be validated at all (bad input, exit code 2); rule violations are
//! not errors but part of the report.

use std::path::PathBuf;

/// Input that cannot be validated: each variant names the path and what to pass instead.
#[derive(Debug, thiserror::Error)]
pub enum SubmissionError {
    /// No job directory was given.
    #[error("no job directories given; pass one or more job dirs (each with a config.json)")]
    NoJobs,
    /// A given path is not a directory.
    #[error("{path}: not a directory; pass job directories (each with a config.json)")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A directory without a job config.
    #[error(
        "{path}: not a job directory: it has no config.json (pass the job dir that `harbor run` or \
         `runner run` wrote, not its parent or one of its trial dirs)"
    )]
    NotAJob {
        /// The directory given.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A job config that is not a JSON object.
    #[error("{path}: not a valid job config: {problem}")]
    BadJobConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A `--trusted-key` file that is not an ed25519 public key.
    #[error("--trusted-key: {0}")]
    TrustedKey(#[from] tasks::records::record_signature::KeyError),
    /// The `--dataset` directory did not load.
    #[error("--dataset: {0}")]
    Dataset(#[from] tasks::TaskError),
    /// The `--dataset` manifest file could not be used.
    #[error("--dataset: {0}")]
    Manifest(#[from] super::manifest::ManifestError),
}

impl SubmissionError {
    /// An `Io` error for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
