//! The outcome taxonomy: every finished trial is exactly one of `scored`, `agent_error` or
//! `infra_error`, decided from its reward and the [`Blame`] of its exception type.
//!
//! Harbor records only the exception class; its readers (and tired humans) then count an
//! engine hiccup as reward 0. The runner records the outcome beside Harbor's fields, counts it
//! in the job record, gates the exit code on it and retries only infrastructure errors.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::exception::{Blame, ExceptionType};

/// How a trial ended, for coverage, retries and the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialOutcome {
    /// The verifier produced a reward. An agent timeout or agent failure that was still
    /// verified is scored.
    Scored,
    /// The agent failed and no reward exists; leaderboards count it as 0.
    AgentError,
    /// Missing data: the infrastructure failed (build, pull, start, backend, verifier
    /// sandbox, interruption, pause, runner bug). Worth running again.
    InfraError,
}

impl TrialOutcome {
    /// The outcome of a trial that recorded `exception` (if any) and has a reward or not.
    ///
    /// An infrastructure exception wins over a reward: a trial that was interrupted or whose
    /// deadlines a pause blew has no trustworthy score whatever it recorded first. A trial
    /// with neither exception nor reward is missing data too.
    pub fn of(exception: Option<&ExceptionType>, has_reward: bool) -> TrialOutcome {
        match (exception.map(ExceptionType::blame), has_reward) {
            (Some(Blame::Infrastructure), _) => TrialOutcome::InfraError,
            (_, true) => TrialOutcome::Scored,
            (Some(Blame::Agent), false) => TrialOutcome::AgentError,
            (None, false) => TrialOutcome::InfraError,
        }
    }

    /// The name recorded in `result.json` (`scored`, `agent_error`, `infra_error`).
    pub fn as_str(self) -> &'static str {
        match self {
            TrialOutcome::Scored => "scored",
            TrialOutcome::AgentError => "agent_error",
            TrialOutcome::InfraError => "infra_error",
        }
    }

    /// True when the trial counts in results (scored, or an agent error counted as 0).
    pub fn is_result(self) -> bool {
        self != TrialOutcome::InfraError
    }
}

impl fmt::Display for TrialOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_follow_reward_and_blame() {
        use ExceptionType as E;
        let cases = [
            (None, true, TrialOutcome::Scored),
            (Some(E::AgentTimeoutError), true, TrialOutcome::Scored),
            (
                Some(E::NonZeroAgentExitCodeError),
                true,
                TrialOutcome::Scored,
            ),
            (Some(E::AgentSetupError), false, TrialOutcome::AgentError),
            (
                Some(E::RewardFileNotFoundError),
                false,
                TrialOutcome::AgentError,
            ),
            (
                Some(E::EnvironmentStartError),
                false,
                TrialOutcome::InfraError,
            ),
            (Some(E::CancelledError), true, TrialOutcome::InfraError),
            (Some(E::RunnerPausedError), true, TrialOutcome::InfraError),
            (None, false, TrialOutcome::InfraError),
        ];
        for (exception, reward, expected) in cases {
            assert_eq!(
                TrialOutcome::of(exception.as_ref(), reward),
                expected,
                "{exception:?} reward={reward}"
            );
        }
        assert_eq!(
            serde_json::to_string(&TrialOutcome::AgentError).unwrap(),
            "\"agent_error\""
        );
    }
}
