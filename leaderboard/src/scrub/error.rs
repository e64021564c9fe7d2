//! Typed errors of the scrubber. Messages name the flag or file and what to do, never a value.

use std::path::PathBuf;

/// Why a scrub could not start or could not finish writing its staged copy.
#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    /// `--in` is missing or not a directory.
    #[error("--in {0}: not a directory; pass the job directory to copy")]
    InputNotDir(PathBuf),
    /// `--out` already exists.
    #[error("--out {0}: already exists; scrub never overwrites, so pick a new path or remove it")]
    OutputExists(PathBuf),
    /// `--out` has no existing parent directory.
    #[error("--out {0}: the parent directory does not exist; create it first")]
    OutputParentMissing(PathBuf),
    /// `--out` would land inside `--in`, so the copy would contain itself.
    #[error("--out {output} is inside --in {input}; pick a destination outside the job directory")]
    OutputInsideInput {
        /// The job directory.
        input: PathBuf,
        /// The destination.
        output: PathBuf,
    },
    /// A `--secret` / `--env-passthrough` argument is not `NAME=VALUE` or `NAME`.
    #[error(
        "{flag} argument #{index}: expected NAME=VALUE (or NAME to read the value from the environment)"
    )]
    BadPair {
        /// The flag, e.g. `--secret`.
        flag: &'static str,
        /// 1-based position among that flag's arguments; the text itself may hold a value.
        index: usize,
    },
    /// A secret name has characters other than letters, digits and `_`.
    #[error(
        "{origin}: secret name `{name}` must be letters, digits and `_` (it is printed in the copy as [REDACTED:NAME])"
    )]
    BadName {
        /// The offending name.
        name: String,
        /// Where it came from.
        origin: String,
    },
    /// A value shorter than the minimum without `--allow-short`.
    #[error(
        "{origin}: the value of {name} is {len} characters; values shorter than {min} are refused because they \
         would match ordinary text. Remove it, or pass --allow-short to redact it anyway"
    )]
    TooShort {
        /// The secret name.
        name: String,
        /// Where it came from.
        origin: String,
        /// Its length in characters.
        len: usize,
        /// The minimum length.
        min: usize,
    },
    /// `NAME` without a value names an unset environment variable.
    #[error("{flag} {name}: the environment variable is not set; pass {name}=VALUE or export it")]
    EnvMissing {
        /// The flag.
        flag: &'static str,
        /// The variable name.
        name: String,
    },
    /// A `--secrets-from` file cannot be read.
    #[error("--secrets-from {path}: cannot read it: {source}")]
    SecretsFileRead {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A `--secrets-from` file is malformed.
    #[error("--secrets-from {path}: {reason}")]
    SecretsFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, without any value.
        reason: String,
    },
    /// Nothing to scrub for.
    #[error(
        "no secrets given: pass --secrets-from FILE, --secret NAME=VALUE or --env-passthrough NAME=VALUE"
    )]
    NoSecrets,
    /// Every candidate replacement marker would itself contain a secret form.
    #[error(
        "every replacement marker contains a secret value; rename the secrets (no value may occur in `[REDACTED:NAME]`)"
    )]
    NoSafeMarker,
    /// Reading the input or writing the staged copy failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl ScrubError {
    /// True when the error is the user's input (exit code 2) rather than a failure mid-scrub.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, ScrubError::Io { .. })
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ScrubError {
        let path = path.into();
        move |source| ScrubError::Io { path, source }
    }
}
