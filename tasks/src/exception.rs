//! Exception types: the names a trial's `exception_info.exception_type` may carry.
//!
//! Harbor records the Python class name of the exception that ended a trial, and its readers
//! (job stats, retry filters, leaderboards) group trials by that string. This enum is the one
//! place those names are written. Harbor's own names come first; the runner-only ones name
//! failures Harbor folds into generic classes, so a reader can tell an infrastructure error
//! from an agent failure. [`ExceptionType::Other`] exists only to read records written by other
//! tools; the runner never produces it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! exception_types {
    ($( $(#[$doc:meta])* $variant:ident => $harbor:expr ),+ $(,)?) => {
        /// The type of the exception that ended (or marked) a trial, by Harbor's class name.
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ExceptionType {
            $( $(#[$doc])* $variant, )+
            /// A name this runner does not know, read from a foreign record.
            Other(String),
        }

        impl ExceptionType {
            /// Every type the runner knows, in declaration order.
            pub const KNOWN: &'static [ExceptionType] = &[$(ExceptionType::$variant),+];

            /// The class name as recorded in `exception_info.exception_type`.
            pub fn as_str(&self) -> &str {
                match self {
                    $( ExceptionType::$variant => stringify!($variant), )+
                    ExceptionType::Other(name) => name,
                }
            }

            /// True for names Harbor itself defines (false for runner-only names and `Other`).
            pub fn is_harbor_name(&self) -> bool {
                match self {
                    $( ExceptionType::$variant => $harbor, )+
                    ExceptionType::Other(_) => false,
                }
            }

            /// The type recorded under `name`; unknown names become [`ExceptionType::Other`].
            pub fn from_name(name: &str) -> ExceptionType {
                match name {
                    $( stringify!($variant) => ExceptionType::$variant, )+
                    other => ExceptionType::Other(other.to_owned()),
                }
            }
        }
    };
}

exception_types! {
    /// The agent ran past its deadline and was stopped; the verifier still ran.
    AgentTimeoutError => true,
    /// Agent setup (install) ran past its deadline.
    AgentSetupTimeoutError => true,
    /// The agent exited non-zero or ended in a failed state; the verifier still ran.
    NonZeroAgentExitCodeError => true,
    /// The verifier ran past its deadline.
    VerifierTimeoutError => true,
    /// The verifier wrote neither `reward.json` nor `reward.txt`.
    RewardFileNotFoundError => true,
    /// A reward file was empty.
    RewardFileEmptyError => true,
    /// A reward file could not be parsed.
    VerifierOutputParseError => true,
    /// The task's `tests/` could not be copied into the environment.
    AddTestsDirError => true,
    /// `/logs/verifier` could not be downloaded.
    DownloadVerifierDirError => true,
    /// The environment (image build or start) ran past its deadline.
    EnvironmentStartTimeoutError => true,
    /// The run was interrupted (Ctrl-C, SIGTERM, SIGHUP) while the trial ran.
    CancelledError => true,
    /// The task image could not be built.
    SandboxBuildFailedError => true,
    /// The environment could not be started or prepared (runner-only).
    EnvironmentStartError => false,
    /// The task's prebuilt `docker_image` could not be pulled, after retries (runner-only; the
    /// message names the image and the registry's answer).
    ImagePullError => false,
    /// The container engine's data root had less free space than the configured watermark, so
    /// no build or pull was started (runner-only).
    DiskSpaceError => false,
    /// The task's healthcheck never passed (runner-only).
    HealthcheckError => false,
    /// The sandbox failed underneath the agent: exec, upload or download (runner-only).
    EnvironmentError => false,
    /// Agent setup failed: an install command, an upload, a refused secret (runner-only).
    AgentSetupError => false,
    /// An installed agent's server never became healthy or died (runner-only).
    AgentServerError => false,
    /// The agent's traces did not convert to a valid ATIF trajectory (runner-only).
    TrajectoryValidationError => false,
    /// A reward file was a symlink, FIFO or oversized and was refused unread (runner-only).
    RewardFileUnsafeError => false,
    /// A `[verifier].env` template named an unset host variable (runner-only).
    VerifierEnvError => false,
    /// The sandbox failed to run a verifier command (runner-only).
    VerifierSandboxError => false,
    /// The environment's writable layer grew past the task's `storage_mb` (runner-only).
    StorageLimitExceededError => false,
    /// The runner itself failed inside the trial: a panic or an unexpected error (runner-only).
    RunnerError => false,
}

impl ExceptionType {
    /// The name readers show for an `exception_info` that carries no type (a foreign record).
    pub const UNKNOWN_NAME: &'static str = "UnknownError";
}

impl fmt::Display for ExceptionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Compares with a recorded name, so tests and readers can write `kind == "AgentTimeoutError"`.
impl PartialEq<&str> for ExceptionType {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl FromStr for ExceptionType {
    type Err = std::convert::Infallible;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Ok(ExceptionType::from_name(name))
    }
}

impl Serialize for ExceptionType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ExceptionType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(ExceptionType::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_kept() {
        for known in ExceptionType::KNOWN {
            assert_eq!(&ExceptionType::from_name(known.as_str()), known);
            let json = serde_json::to_string(known).unwrap();
            assert_eq!(json, format!("\"{}\"", known.as_str()));
            assert_eq!(
                &serde_json::from_str::<ExceptionType>(&json).unwrap(),
                known
            );
        }
        let foreign = ExceptionType::from_name("DaytonaError");
        assert_eq!(foreign, ExceptionType::Other("DaytonaError".into()));
        assert_eq!(foreign.to_string(), "DaytonaError");
        assert!(!foreign.is_harbor_name());
        assert!(ExceptionType::AgentTimeoutError.is_harbor_name());
        assert!(!ExceptionType::RunnerError.is_harbor_name());
    }
}
