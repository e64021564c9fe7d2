//! Errors of loading tasks and datasets: each names the file, the field and what to do.

use std::path::PathBuf;

use crate::unsupported::UnsupportedFeature;

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
    /// A valid Harbor task that uses features the runner cannot run yet.
    #[error("task {task} ({dir}): {}", join_features(features))]
    Unsupported {
        /// The task's name.
        task: String,
        /// The task directory.
        dir: PathBuf,
        /// Every unsupported feature it uses (never empty).
        features: Vec<UnsupportedFeature>,
    },
    /// Two task directories of one dataset have the same task name, so they would share one
    /// image and one set of trial names.
    #[error(
        "task name {name} is used by two task directories, {first} and {second}; give each task its own [task].name (or directory name)"
    )]
    DuplicateTaskName {
        /// The shared name.
        name: String,
        /// The first directory (in sorted order).
        first: PathBuf,
        /// The second directory.
        second: PathBuf,
    },
    /// A file of the task the runner will not read as the task's own: a link out of the task
    /// directory, a link that could loop, or a FIFO, socket or device.
    #[error(
        "{path}: {problem}; a task may hold only regular files, directories and links to them inside the task directory (copy the file in instead)"
    )]
    NotOwnFile {
        /// The entry in the task directory.
        path: PathBuf,
        /// What it is or where it leads.
        problem: String,
    },
    /// `dataset.toml` lists a task that no directory of the dataset holds.
    #[error(
        "{manifest}: [[tasks]] lists {name:?}, but no task directory of the dataset has that name; add the task or remove the entry"
    )]
    ListedTaskMissing {
        /// The `dataset.toml` file.
        manifest: PathBuf,
        /// The listed name.
        name: String,
    },
    /// A walk of the task's tree ended: a directory link that loops, or a tree past the
    /// walker's bounds ([`crate::walk`]).
    #[error("{0}")]
    Tree(crate::walk::WalkError),
}

/// A walker's error as a task's: a link out of the task is not the task's own file.
impl From<crate::walk::WalkError> for TaskError {
    fn from(e: crate::walk::WalkError) -> Self {
        use crate::walk::WalkError;
        match e {
            WalkError::Io { path, source } => TaskError::Io { path, source },
            WalkError::OutOfRoot { link, target, root } => TaskError::NotOwnFile {
                path: link,
                problem: format!(
                    "a link to {}, outside the task directory {}",
                    target.display(),
                    root.display()
                ),
            },
            other => TaskError::Tree(other),
        }
    }
}

fn join_features(features: &[UnsupportedFeature]) -> String {
    features
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
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
