//! Why walking, archiving or packaging a directory failed; every message names the path and
//! says what to do.

use std::path::PathBuf;

/// A failure to walk or archive a host directory (an image build context, an upload, or an
/// agent source before provenance adds its own wording). Messages name the path; callers add
/// what the directory was for.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Reading the directory or one of its entries failed.
    #[error("{path}: {source}")]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A path cannot be stored reproducibly (not UTF-8, or holds a newline).
    #[error("{path}: {problem}; rename it or remove it from the directory")]
    BadPath {
        /// The offending path.
        path: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An entry that is neither a file, a directory nor a symlink (socket, FIFO, device).
    #[error("{path}: not a regular file, directory or symlink; remove it from the directory")]
    UnsupportedEntry {
        /// The offending path.
        path: PathBuf,
    },
    /// A pattern of an ignore file (`.dockerignore`) does not parse.
    #[error("{path} line {line}: pattern `{pattern}` is invalid: {message}")]
    BadPattern {
        /// The ignore file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The pattern as written.
        pattern: String,
        /// The parser's message.
        message: String,
    },
    /// An upload's container path is not absolute or holds `.`, `..` or an empty component.
    #[error(
        "container path `{target}` must be absolute and made of plain names (no `.`, `..` or `//`)"
    )]
    BadTarget {
        /// The path as given.
        target: String,
    },
    /// Writing the tar stream failed.
    #[error("writing the archive: {0}")]
    Write(std::io::Error),
}

impl ArchiveError {
    /// An I/O error at `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ArchiveError::Io {
            path: path.into(),
            source,
        }
    }
}

/// A failure to package or describe an agent source tree.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    /// Reading the source tree failed.
    #[error("agent source {path}: {source}")]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A path cannot be stored reproducibly (not UTF-8, or holds a newline).
    #[error(
        "agent source {path}: {problem}; rename it or exclude it with a glob in the agent config's `excludes`"
    )]
    BadPath {
        /// The offending path.
        path: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An entry that is neither a file, a directory nor a symlink (socket, FIFO, device).
    #[error(
        "agent source {path}: not a regular file, directory or symlink; exclude it in the agent config's `excludes`"
    )]
    UnsupportedEntry {
        /// The offending path.
        path: PathBuf,
    },
    /// A user exclude glob does not parse.
    #[error("exclude glob `{glob}` is invalid: {message}")]
    BadGlob {
        /// The glob as written.
        glob: String,
        /// The parser's message.
        message: String,
    },
    /// A known secret value was found inside a file that would be uploaded.
    #[error(
        "agent source file {path} contains the value of the credential variable {variable}; \
         refusing to upload it into the container. Remove the secret from the file or exclude the file"
    )]
    SecretInSource {
        /// The file holding the value (relative to the source root).
        path: String,
        /// The name of the variable whose value was found (never the value).
        variable: String,
    },
    /// `--require-clean-source` was given and the git tree is dirty.
    #[error(
        "agent source {root} has uncommitted changes ({summary}); commit or stash them, \
         or drop --require-clean-source to record the dirty state instead"
    )]
    DirtySource {
        /// The source root.
        root: PathBuf,
        /// Counts of the dirty state.
        summary: String,
    },
    /// Building the archive failed.
    #[error("building the agent source archive: {0}")]
    Archive(std::io::Error),
}

impl From<ArchiveError> for ProvenanceError {
    /// The walker's and writer's errors in the agent-source wording.
    fn from(error: ArchiveError) -> Self {
        match error {
            ArchiveError::Io { path, source } => ProvenanceError::Io { path, source },
            ArchiveError::BadPath { path, problem } => ProvenanceError::BadPath { path, problem },
            ArchiveError::UnsupportedEntry { path } => ProvenanceError::UnsupportedEntry { path },
            ArchiveError::BadPattern {
                pattern, message, ..
            } => ProvenanceError::BadGlob {
                glob: pattern,
                message,
            },
            ArchiveError::Write(source) => ProvenanceError::Archive(source),
            // Agent sources are archived without a prefix, so this cannot happen there.
            bad @ ArchiveError::BadTarget { .. } => {
                ProvenanceError::Archive(std::io::Error::other(bad.to_string()))
            }
        }
    }
}

impl ProvenanceError {
    /// An I/O error at `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ProvenanceError::Io {
            path: path.into(),
            source,
        }
    }
}
