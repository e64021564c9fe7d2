//! What can go wrong resolving a dataset by name; every variant names what is at fault and,
//! where there is one, the fix. All are the user's input or the network, never a bug: the
//! runner maps them to exit 2, before any trial starts.

use std::path::PathBuf;

/// A dataset that cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// registry.json is not Harbor's shape.
    #[error("{origin}: {field}: {problem}")]
    Malformed {
        /// The registry's URL or file.
        origin: String,
        /// The field at fault (`[3].tasks[0]`).
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// One `name@version` listed twice with different contents.
    #[error(
        "{origin}: {dataset} is defined twice, differently (datasets [{first}] and [{second}]); remove one of them"
    )]
    Conflict {
        /// The registry.
        origin: String,
        /// `name@version`.
        dataset: String,
        /// Index of the first definition.
        first: usize,
        /// Index of the second.
        second: usize,
    },
    /// No dataset of that name.
    #[error("dataset {name:?} is not in the registry {origin}; it has: {available}")]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// The registry.
        origin: String,
        /// Its dataset names.
        available: String,
    },
    /// The dataset exists, the version does not.
    #[error(
        "dataset {name:?} has no version {version:?} in the registry {origin}; its versions: {available}"
    )]
    UnknownVersion {
        /// The dataset.
        name: String,
        /// The version asked for.
        version: String,
        /// The registry.
        origin: String,
        /// Its versions.
        available: String,
    },
    /// `org/name`: a Harbor Hub dataset.
    #[error(
        "{name:?} is a Harbor Hub dataset (org/name), which runner cannot read; give the dataset's registry.json with --registry-url/--registry-path and its plain name, or download it and pass --path"
    )]
    HubDataset {
        /// The name given.
        name: String,
    },
    /// The name is empty or not a name.
    #[error("{0:?} is not a dataset name; give NAME or NAME@VERSION (e.g. terminal-bench@2.0)")]
    BadName(String),
    /// The registry could not be read and no copy is cached.
    #[error("cannot read the registry {origin}: {detail}")]
    Unreachable {
        /// URL or file.
        origin: String,
        /// Why.
        detail: String,
    },
    /// The repository did not answer.
    #[error("cannot fetch {repo} at commit {commit}: {detail}")]
    Network {
        /// The git URL.
        repo: String,
        /// The commit (or the branch asked for).
        commit: String,
        /// git's words.
        detail: String,
    },
    /// The repository answered and has no such commit.
    #[error(
        "{repo} has no commit {commit} (task {task}); the registry pins a commit that does not exist there"
    )]
    NoCommit {
        /// The git URL.
        repo: String,
        /// The commit.
        commit: String,
        /// A task pinned to it.
        task: String,
    },
    /// The commit exists, the task's path does not.
    #[error("task {task}: {repo} at commit {commit} has no directory {path:?}")]
    MissingPath {
        /// The task.
        task: String,
        /// The git URL.
        repo: String,
        /// The commit.
        commit: String,
        /// The path.
        path: String,
    },
    /// A cached task changed since it was fetched and could not be fetched again.
    #[error(
        "task {task}: the cached copy in {dir} no longer matches what was fetched ({detail}), and fetching it again failed: {fetch}; restore the network or delete {dir}"
    )]
    Tampered {
        /// The task.
        task: String,
        /// Its cache entry.
        dir: PathBuf,
        /// What differs.
        detail: String,
        /// The failed refetch.
        fetch: String,
    },
    /// A registry task with no repository whose local path is missing.
    #[error("task {task}: local path {path} (no git_url) is not a directory")]
    LocalPath {
        /// The task.
        task: String,
        /// The path.
        path: String,
    },
    /// The dataset lists no task.
    #[error("dataset {0} lists no task")]
    Empty(String),
    /// git is missing or failed locally.
    #[error("git {what} failed: {detail}")]
    Git {
        /// The step.
        what: String,
        /// git's words.
        detail: String,
    },
    /// A file operation on the cache.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl RegistryError {
    /// An I/O error at `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RegistryError {
        let path = path.into();
        move |source| RegistryError::Io { path, source }
    }
}
