//! Errors of loading tasks and datasets: each names the file, the field and what to do.

use std::path::PathBuf;

/// A task or dataset that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A file could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A required file or directory is missing.
    #[error("{path}: missing; a Harbor task needs {what}")]
    Missing {
        /// The path that should exist.
        path: PathBuf,
        /// What the file is for.
        what: &'static str,
    },
    /// A TOML file does not parse or has a field of the wrong type.
    #[error("{path}: {field}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted field name, or `(syntax)` for a parse error.
        field: String,
        /// What is wrong and what to do.
        problem: String,
    },
}

impl TaskError {
    /// An `Invalid` error for `field` of `path`.
    pub fn invalid(
        path: impl Into<PathBuf>,
        field: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            path: path.into(),
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// An `Io` error for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
