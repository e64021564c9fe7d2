//! A job's `override_error_policy` (Harbor 0.26: exception type name → `should_retry`,
//! `should_grade`, `has_valid_reward`) mapped onto runner.
//!
//! - `should_retry` edits the retry exclusions as Harbor edits `retry.exclude_exceptions`,
//!   unless the job gave that list itself ([`crate::job::RetryPolicy::apply_overrides`]).
//!   Runner retries only trials whose outcome is an infrastructure error (re-running an
//!   agent's failure until it passes would inflate its score), so `true` for a type runner
//!   blames on the agent cannot be honoured and is refused by name.
//! - `should_grade` decides whether the verifier runs after an agent failure of the type: the
//!   only place Harbor consults it, and the only one where runner can honour it. Runner
//!   verifies after [`GRADED_AFTER_BY_DEFAULT`]; `false` stops after them, `true` is accepted
//!   only for them (after any other failure the agent's sandbox, server or environment is
//!   gone, so a verification would be half a run) and refused by name otherwise.
//! - `has_valid_reward` changes the recorded `reward_valid` and `exception_info.policy` (Harbor's
//!   reading of the record); runner's own `outcome` and statistics keep runner's rules.
//!
//! Each recorded exception carries the override of its type (`policy_override`) beside the
//! policy computed with it (`policy`).

use tasks::error_policy::{ErrorPolicyOverrides, is_listed};
use tasks::{Blame, ExceptionType};

/// The agent failures after which runner still verifies what the agent left (as Harbor does
/// after a timeout or a non-zero exit): an `override_error_policy` entry can only turn this off.
pub const GRADED_AFTER_BY_DEFAULT: [ExceptionType; 3] = [
    ExceptionType::AgentTimeoutError,
    ExceptionType::NonZeroAgentExitCodeError,
    ExceptionType::TrajectoryValidationError,
];

/// An `override_error_policy` entry runner refuses (the run is refused before anything starts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    /// A name neither runner records nor Harbor 0.26's policy table lists: it could never
    /// match (a typo, or a type of another tool).
    #[error(
        "override_error_policy.{0}: unknown exception type: runner never records it and Harbor \
         0.26's error policy does not list it, so the override could never apply; name a type \
         from `runner run --help`'s --retry-include list or Harbor's table, or remove the entry"
    )]
    UnknownType(String),
    /// `should_grade: true` for a type runner cannot verify after.
    #[error(
        "override_error_policy.{0}.should_grade: true is not supported: runner verifies after \
         an agent failure only of AgentTimeoutError, NonZeroAgentExitCodeError and \
         TrajectoryValidationError; after a {0} there is nothing sound left to verify. Remove \
         should_grade or set it to false"
    )]
    CannotGrade(String),
    /// `should_retry: true` for a type runner blames on the agent.
    #[error(
        "override_error_policy.{0}.should_retry: true is not supported: runner blames a {0} on \
         the agent and never retries an agent's failure (re-running it until it passes would \
         inflate the score); remove should_retry or set it to false"
    )]
    CannotRetryAgent(String),
    /// `should_retry: true` for an interruption.
    #[error(
        "override_error_policy.CancelledError.should_retry: true is not supported: an \
         interrupted run is ending and never retries its trials; remove should_retry"
    )]
    CannotRetryCancelled,
}

/// Refuses the entries of `overrides` runner cannot honour (see the module docs). Harbor
/// accepts any name; runner refuses names nothing can raise, as its retry lists do.
pub fn check(overrides: &ErrorPolicyOverrides) -> Result<(), OverrideError> {
    for (name, entry) in overrides {
        let kind = ExceptionType::from_name(name);
        if matches!(kind, ExceptionType::Other(_)) && !is_listed(name) {
            return Err(OverrideError::UnknownType(name.clone()));
        }
        if entry.should_grade == Some(true) && !GRADED_AFTER_BY_DEFAULT.contains(&kind) {
            return Err(OverrideError::CannotGrade(name.clone()));
        }
        if entry.should_retry == Some(true) {
            if kind == ExceptionType::CancelledError {
                return Err(OverrideError::CannotRetryCancelled);
            }
            if kind.blame() == Blame::Agent {
                return Err(OverrideError::CannotRetryAgent(name.clone()));
            }
        }
    }
    Ok(())
}

/// Whether the trial goes on to verification after an agent failure of `kind`: runner's
/// default ([`GRADED_AFTER_BY_DEFAULT`]) unless `overrides` says `should_grade: false`.
pub fn verifies_after(kind: &ExceptionType, overrides: &ErrorPolicyOverrides) -> bool {
    GRADED_AFTER_BY_DEFAULT.contains(kind)
        && overrides
            .get(kind.as_str())
            .and_then(|o| o.should_grade)
            .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides(json: &str) -> ErrorPolicyOverrides {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn should_grade_false_stops_after_an_agent_failure_runner_would_verify() {
        let none = ErrorPolicyOverrides::new();
        let timeout = ExceptionType::AgentTimeoutError;
        assert!(verifies_after(&timeout, &none));
        let o = overrides(r#"{"AgentTimeoutError": {"should_grade": false}}"#);
        assert!(!verifies_after(&timeout, &o));
        // Other types are untouched by it.
        assert!(verifies_after(
            &ExceptionType::NonZeroAgentExitCodeError,
            &o
        ));
        // Only retry or reward parts: grading stays runner's.
        let o = overrides(r#"{"AgentTimeoutError": {"should_retry": false}}"#);
        assert!(verifies_after(&timeout, &o));
        assert!(!verifies_after(&ExceptionType::AgentServerError, &o));
    }

    #[test]
    fn entries_runner_cannot_honour_are_refused_by_name() {
        let check_of = |json: &str| check(&overrides(json));
        assert_eq!(
            check_of(r#"{"AgentTimeoutError": {"should_grade": true}}"#),
            Ok(())
        );
        assert_eq!(
            check_of(r#"{"EnvironmentStartTimeoutError": {"should_grade": true}}"#),
            Err(OverrideError::CannotGrade(
                "EnvironmentStartTimeoutError".into()
            ))
        );
        assert_eq!(
            check_of(r#"{"CancelledError": {"should_retry": true}}"#),
            Err(OverrideError::CannotRetryCancelled)
        );
        assert_eq!(
            check_of(r#"{"AgentTimeoutError": {"should_retry": true}}"#),
            Err(OverrideError::CannotRetryAgent("AgentTimeoutError".into()))
        );
        assert_eq!(
            check_of(r#"{"VerifierEnvError": {"should_retry": true}}"#),
            Ok(())
        );
        assert_eq!(
            check_of(r#"{"AgentTimeoutErorr": {"should_retry": true}}"#),
            Err(OverrideError::UnknownType("AgentTimeoutErorr".into()))
        );
        // Harbor's own types (raised by its agents and model clients) are read, as are
        // runner-only ones, and a false should_grade is always honoured.
        assert_eq!(
            check_of(
                r#"{"ApiRateLimitError": {"should_retry": false},
                    "VerifierKilledError": {"has_valid_reward": true},
                    "HealthcheckError": {"should_grade": false}}"#
            ),
            Ok(())
        );
        let message = check_of(r#"{"X": {"should_grade": false}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("override_error_policy.X: unknown exception type"),
            "{message}"
        );
    }
}
