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

/// The first line of a failure message: what one-line reports (the live view, `job.log`, the
/// end summary) show of it. The whole message stays in `result.json` and `exception.txt`.
pub fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or("")
}

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
    /// The verification was killed from inside the trial, with no memory limit hit: the
    /// process supervising the isolated tests died of a signal, which only a process in the
    /// trial's PID namespace (what the agent left running, or the tests themselves) can send,
    /// or the trial's container stopped before its verification ended (the agent stopped its
    /// PID 1). The verification the agent destroyed counts as its failure (runner-only).
    VerifierKilledError => false,
    /// The runner could not do its own work in the trial's environment because of the state
    /// left inside it, outside any memory limit or engine fault: the main container stopped
    /// without being OOM-killed (its PID 1 was ended from inside), or the shell the runner's
    /// commands run through (`bash`) is missing, not executable or not a shell any more. Only
    /// what runs inside (the agent, its installer, what they left running) reaches that state,
    /// so it is the agent's failure, never retried (runner-only). An image that never had a
    /// working `bash` fails every trial this way, the oracle's included.
    BrokenEnvironmentError => false,
    /// A step's `setup.sh` failed, ran past the setup deadline or could not run, or the step's
    /// healthcheck did not pass, in the container the agent's install and earlier steps left:
    /// the agent's failure, never retried (runner-only; Harbor records a `RuntimeError`). A
    /// task whose step setup fails on its own fails its oracle trials too.
    StepSetupError => false,
    /// What the agent left in the trial kept the isolated tests from starting: a program or
    /// library of the image's toolchain replaced by something that cannot be covered (a
    /// directory where the image has a file), directories kept swapping while the jail anchored
    /// them. A verification the agent made impossible counts as its failure (runner-only).
    VerifierBlockedError => false,
    /// The environment's writable layer grew past the task's `storage_mb` (runner-only).
    StorageLimitExceededError => false,
    /// The runner itself failed inside the trial: a panic or an unexpected error (runner-only).
    RunnerError => false,
    /// A backend call (engine, exec, transfer) did not return within its phase deadline plus
    /// the watchdog's grace, so the runner abandoned the trial (runner-only).
    BackendTimeoutError => false,
    /// The runner was paused (SIGSTOP, a suspended machine) while the trial ran and a deadline
    /// expired meanwhile, so the timeout it recorded says nothing about the agent (runner-only).
    RunnerPausedError => false,
    /// The host-side LLM bridge could not serve the trial: its start was refused (a declared
    /// model's provider has no key), or the in-container relay did not come up (runner-only).
    LlmBridgeError => false,
}

/// Whose failure an exception type records: the agent's (the trial still counts, as 0 on
/// leaderboards) or the infrastructure's (the trial is missing data and worth running again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blame {
    /// The agent, or what it left behind, caused it: timeouts of its own phases, failed
    /// installs, a broken server, a non-zero exit, an invalid trajectory, tests that timed out
    /// or found no reward file in the state the agent left.
    Agent,
    /// Image build or pull, container start, the backend or sandbox, the verifier's own
    /// plumbing, an interruption, a pause of the runner, or a runner bug.
    Infrastructure,
}

/// A named group of exception types that `--retry-include`, `--retry-exclude` and
/// `--retry-failed` accept in place of a single type, so a list never misses a sub-kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExceptionFamily {
    /// Every deadline that expired (Python's `asyncio.TimeoutError` subclasses in Harbor, and
    /// the runner's watchdog).
    Timeout,
    /// The environment: image, container start, healthcheck, the sandbox under the agent.
    Environment,
    /// The agent's own phases.
    Agent,
    /// Verification: the tests, their reward files and the verifier's plumbing.
    Verifier,
}

impl ExceptionFamily {
    /// Every family.
    pub const ALL: [ExceptionFamily; 4] = [
        ExceptionFamily::Timeout,
        ExceptionFamily::Environment,
        ExceptionFamily::Agent,
        ExceptionFamily::Verifier,
    ];

    /// The name the flags accept. `EnvironmentError` is also a type of its own; as a pattern
    /// it means the family, which includes that type.
    pub fn name(self) -> &'static str {
        match self {
            ExceptionFamily::Timeout => "TimeoutError",
            ExceptionFamily::Environment => "EnvironmentError",
            ExceptionFamily::Agent => "AgentError",
            ExceptionFamily::Verifier => "VerifierError",
        }
    }

    /// The family called `name`, if any.
    pub fn from_name(name: &str) -> Option<ExceptionFamily> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The known types in this family, in declaration order.
    pub fn members(self) -> Vec<ExceptionType> {
        ExceptionType::KNOWN
            .iter()
            .filter(|kind| kind.families().contains(&self))
            .cloned()
            .collect()
    }
}

impl ExceptionType {
    /// Whose failure this is. This match is the one table the outcome taxonomy
    /// (`scored` / `agent_error` / `infra_error`, see [`crate::TrialOutcome`]) is built on.
    /// A name read from a foreign record counts as infrastructure: nothing says the agent
    /// failed.
    pub fn blame(&self) -> Blame {
        use ExceptionType::*;
        match self {
            AgentTimeoutError
            | AgentSetupTimeoutError
            | NonZeroAgentExitCodeError
            | AgentSetupError
            | AgentServerError
            | TrajectoryValidationError
            | VerifierTimeoutError
            | RewardFileNotFoundError
            | RewardFileEmptyError
            | VerifierOutputParseError
            | RewardFileUnsafeError
            | VerifierKilledError
            | BrokenEnvironmentError
            | StepSetupError
            | VerifierBlockedError
            | StorageLimitExceededError => Blame::Agent,
            AddTestsDirError
            | DownloadVerifierDirError
            | VerifierEnvError
            | VerifierSandboxError
            | EnvironmentStartTimeoutError
            | SandboxBuildFailedError
            | ImagePullError
            | DiskSpaceError
            | EnvironmentStartError
            | HealthcheckError
            | EnvironmentError
            | CancelledError
            | RunnerError
            | BackendTimeoutError
            | RunnerPausedError
            | LlmBridgeError
            | Other(_) => Blame::Infrastructure,
        }
    }

    /// The families this type belongs to (see [`ExceptionFamily`]).
    pub fn families(&self) -> &'static [ExceptionFamily] {
        use ExceptionFamily as F;
        use ExceptionType::*;
        match self {
            AgentTimeoutError | AgentSetupTimeoutError => &[F::Timeout, F::Agent],
            NonZeroAgentExitCodeError
            | AgentSetupError
            | AgentServerError
            | TrajectoryValidationError
            | BrokenEnvironmentError
            | StepSetupError
            | StorageLimitExceededError => &[F::Agent],
            VerifierTimeoutError => &[F::Timeout, F::Verifier],
            RewardFileNotFoundError
            | RewardFileEmptyError
            | VerifierOutputParseError
            | RewardFileUnsafeError
            | AddTestsDirError
            | DownloadVerifierDirError
            | VerifierEnvError
            | VerifierSandboxError
            | VerifierKilledError
            | VerifierBlockedError => &[F::Verifier],
            EnvironmentStartTimeoutError | BackendTimeoutError => &[F::Timeout, F::Environment],
            SandboxBuildFailedError
            | ImagePullError
            | DiskSpaceError
            | EnvironmentStartError
            | HealthcheckError
            | LlmBridgeError
            | EnvironmentError => &[F::Environment],
            CancelledError | RunnerError | RunnerPausedError | Other(_) => &[],
        }
    }

    /// The types a flag value names: a family name means every member, any other known name
    /// means that type alone, and a name Harbor excludes by default means itself (see
    /// [`crate::error_policy::default_retry_exclusions`]). Other names are refused, so a typo
    /// never empties a list.
    pub fn expand_pattern(name: &str) -> Result<Vec<ExceptionType>, UnknownExceptionName> {
        if let Some(family) = ExceptionFamily::from_name(name) {
            return Ok(family.members());
        }
        match ExceptionType::from_name(name) {
            // Harbor 0.26 writes its default retry exclusions into every job config it saves;
            // those runner does not have are raised by Harbor's own agents and model clients,
            // and match nothing runner records, so Harbor's configs run unchanged.
            other @ ExceptionType::Other(_)
                if crate::error_policy::default_retry_exclusions().any(|n| n == name) =>
            {
                Ok(vec![other])
            }
            ExceptionType::Other(_) => Err(UnknownExceptionName(name.to_owned())),
            known => Ok(vec![known]),
        }
    }
}

/// A flag named an exception type or family that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown exception type or family {0:?}; families: {families}; types: {types}",
    families = ExceptionFamily::ALL.map(|f| f.name()).join(", "),
    types = ExceptionType::KNOWN.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownExceptionName(pub String);

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
    fn harbors_default_exclusions_are_read_and_typos_still_refused() {
        for name in crate::error_policy::default_retry_exclusions() {
            let types = ExceptionType::expand_pattern(name).unwrap();
            assert_eq!(types.len(), 1, "{name}");
            assert_eq!(types[0].as_str(), name);
        }
        assert!(ExceptionType::expand_pattern("BadRequestErorr").is_err());
        assert!(ExceptionType::expand_pattern("ApiRateLimitError").is_err());
    }

    #[test]
    fn one_line_reports_show_the_first_line_of_a_message() {
        assert_eq!(first_line("build failed\nstep 3/7: exit 1"), "build failed");
        assert_eq!(first_line(""), "");
        let info = crate::records::ExceptionInfo {
            exception_type: ExceptionType::AgentTimeoutError,
            exception_message: "Agent execution timed out after 5 seconds\nkilled".into(),
            exception_traceback: String::new(),
            occurred_at: chrono::Utc::now(),
            policy: None,
            policy_override: None,
        };
        assert_eq!(
            info.headline(),
            "AgentTimeoutError: Agent execution timed out after 5 seconds"
        );
    }

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

    #[test]
    fn the_blame_table_matches_the_issue_taxonomy() {
        for infra in [
            "SandboxBuildFailedError",
            "EnvironmentStartError",
            "EnvironmentStartTimeoutError",
            "EnvironmentError",
            "VerifierSandboxError",
            "CancelledError",
            "RunnerError",
            "BackendTimeoutError",
            "RunnerPausedError",
            "DaytonaError",
        ] {
            assert_eq!(
                ExceptionType::from_name(infra).blame(),
                Blame::Infrastructure,
                "{infra}"
            );
        }
        for agent in [
            "AgentTimeoutError",
            "NonZeroAgentExitCodeError",
            "AgentSetupError",
            "TrajectoryValidationError",
            "RewardFileNotFoundError",
            "VerifierKilledError",
            "BrokenEnvironmentError",
            "StepSetupError",
            "StorageLimitExceededError",
            "VerifierBlockedError",
        ] {
            assert_eq!(
                ExceptionType::from_name(agent).blame(),
                Blame::Agent,
                "{agent}"
            );
        }
    }

    #[test]
    fn patterns_expand_families_and_refuse_typos() {
        let environment = ExceptionType::expand_pattern("EnvironmentError").unwrap();
        for member in [
            ExceptionType::EnvironmentError,
            ExceptionType::EnvironmentStartError,
            ExceptionType::SandboxBuildFailedError,
            ExceptionType::BackendTimeoutError,
        ] {
            assert!(environment.contains(&member), "{member}");
        }
        assert!(!environment.contains(&ExceptionType::AgentTimeoutError));
        let timeouts = ExceptionType::expand_pattern("TimeoutError").unwrap();
        assert!(timeouts.contains(&ExceptionType::VerifierTimeoutError));
        assert_eq!(
            ExceptionType::expand_pattern("AgentTimeoutError").unwrap(),
            vec![ExceptionType::AgentTimeoutError]
        );
        let err = ExceptionType::expand_pattern("EnvironmentStartErorr").unwrap_err();
        assert!(err.to_string().contains("EnvironmentStartErorr"), "{err}");
        assert!(err.to_string().contains("VerifierError"), "{err}");
        // Every family has members, and every member's families include it.
        for family in ExceptionFamily::ALL {
            assert!(!family.members().is_empty(), "{family:?}");
        }
    }
}
