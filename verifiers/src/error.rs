//! Verifier failures, named after Harbor's exception classes so job stats group them alike.

use std::path::PathBuf;

use tasks::ExceptionType;
use tasks::records::VerifierResult;
use tasks::template::UnresolvedVar;

/// Why a file the verifier reads was refused without being followed or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The entry is a symbolic link (it could point anywhere on the host or in the container).
    Symlink,
    /// The entry is not a regular file: a FIFO (opening it blocks), socket, device or directory.
    NotRegular {
        /// What it is, e.g. `fifo`.
        kind: String,
    },
    /// The file is larger than the limit.
    TooLarge {
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Symlink => write!(f, "it is a symbolic link"),
            Refusal::NotRegular { kind } => write!(f, "it is a {kind}, not a regular file"),
            Refusal::TooLarge { size, limit } => {
                write!(f, "it is {size} bytes, over the {limit}-byte limit")
            }
        }
    }
}

/// One verifier failure; [`VerifierErrorKind::exception_type`] gives Harbor's class name.
#[derive(Debug, thiserror::Error)]
pub enum VerifierErrorKind {
    /// The isolated tests' supervisor was killed from inside the trial (see
    /// [`tasks::isolation::IsolatedVerifyOutcome::Killed`]).
    #[error(
        "task {task}: the verification was killed from inside the trial: {message}; this counts as the agent's failure (if the oracle's trials end this way too, the task itself causes it)"
    )]
    Killed {
        /// The task's name.
        task: String,
        /// What the sandbox saw.
        message: String,
    },
    /// What the agent left in the trial kept the isolated tests from starting (see
    /// [`tasks::isolation::IsolatedVerifyOutcome::Blocked`]).
    #[error(
        "task {task}: the agent's changes to the environment kept the tests from starting: {message}; this counts as the agent's failure (if the oracle's trials end this way too, the task's image is at fault)"
    )]
    Blocked {
        /// The task's name.
        task: String,
        /// What the sandbox found.
        message: String,
    },
    /// The task's `tests/` could not be copied to `/tests`.
    #[error(
        "task {task}: copying tests/ to /tests failed: {message}; check the task's tests/ directory and the container"
    )]
    AddTestsDir {
        /// The task's name.
        task: String,
        /// What went wrong.
        message: String,
    },
    /// A `[verifier].env` template names an unset host variable.
    #[error("task {task}: [verifier].env in task.toml: {source}")]
    Env {
        /// The task's name.
        task: String,
        /// The unresolved template.
        source: UnresolvedVar,
    },
    /// The sandbox failed to run a verifier command (not a non-zero exit of the tests).
    #[error("task {task}: verifier step '{step}' could not run: {message}")]
    Sandbox {
        /// The task's name.
        task: String,
        /// The step, e.g. `run /tests/test.sh`.
        step: String,
        /// What went wrong.
        message: String,
    },
    /// The verifier did not finish before its deadline.
    #[error(
        "task {task}: the verifier did not finish within its {timeout_sec:.1} s deadline; raise [verifier].timeout_sec or --verifier-timeout-multiplier"
    )]
    Timeout {
        /// The task's name.
        task: String,
        /// The time the verifier had, in seconds.
        timeout_sec: f64,
    },
    /// `/logs/verifier` could not be downloaded into the trial directory.
    #[error("task {task}: downloading /logs/verifier to {target} failed: {message}")]
    DownloadVerifierDir {
        /// The task's name.
        task: String,
        /// The host directory.
        target: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Neither `reward.json` nor `reward.txt` was written.
    #[error(
        "no reward file in {dir}: tests/test.sh must write /logs/verifier/reward.txt (a number) or reward.json (a flat name->number map); see test-stdout.txt there"
    )]
    RewardFileNotFound {
        /// The downloaded verifier directory.
        dir: PathBuf,
    },
    /// The reward file exists but is empty.
    #[error(
        "reward file {path} is empty: tests/test.sh must write a number (reward.txt) or a JSON map (reward.json)"
    )]
    RewardFileEmpty {
        /// The file.
        path: PathBuf,
    },
    /// The reward file could not be parsed.
    #[error("reward file {path} could not be parsed: {message}")]
    OutputParse {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The reward file is a symlink, a FIFO, not a regular file, or too large; it was not read.
    #[error(
        "verifier output {path} was refused and not read: {refusal}; tests/test.sh must write its reward as a small regular file in the /logs/verifier directory"
    )]
    RewardFileUnsafe {
        /// The file (container path when refused inside the container, host path otherwise).
        path: PathBuf,
        /// Why.
        refusal: Refusal,
    },
}

impl VerifierErrorKind {
    /// Harbor's exception class name for this failure (runner-only names where Harbor has none).
    pub fn exception_type(&self) -> ExceptionType {
        match self {
            VerifierErrorKind::AddTestsDir { .. } => ExceptionType::AddTestsDirError,
            VerifierErrorKind::Env { .. } => ExceptionType::VerifierEnvError,
            VerifierErrorKind::Sandbox { .. } => ExceptionType::VerifierSandboxError,
            VerifierErrorKind::Killed { .. } => ExceptionType::VerifierKilledError,
            VerifierErrorKind::Blocked { .. } => ExceptionType::VerifierBlockedError,
            VerifierErrorKind::Timeout { .. } => ExceptionType::VerifierTimeoutError,
            VerifierErrorKind::DownloadVerifierDir { .. } => {
                ExceptionType::DownloadVerifierDirError
            }
            VerifierErrorKind::RewardFileNotFound { .. } => ExceptionType::RewardFileNotFoundError,
            VerifierErrorKind::RewardFileEmpty { .. } => ExceptionType::RewardFileEmptyError,
            VerifierErrorKind::OutputParse { .. } => ExceptionType::VerifierOutputParseError,
            VerifierErrorKind::RewardFileUnsafe { .. } => ExceptionType::RewardFileUnsafeError,
        }
    }
}

/// A failed verification: the failure, plus what was learned before it (exit code, checks).
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct VerifierError {
    /// What failed.
    pub kind: VerifierErrorKind,
    /// The test exit code and named checks, when the tests ran; `rewards` is always `None`.
    pub partial: Option<VerifierResult>,
}

impl VerifierError {
    /// Harbor's exception class name, for `exception_info.exception_type`.
    pub fn exception_type(&self) -> ExceptionType {
        self.kind.exception_type()
    }

    /// Attaches what the tests produced before the failure.
    pub fn with_partial(mut self, partial: VerifierResult) -> Self {
        self.partial = Some(partial);
        self
    }
}

impl From<VerifierErrorKind> for VerifierError {
    fn from(kind: VerifierErrorKind) -> Self {
        VerifierError {
            kind,
            partial: None,
        }
    }
}
