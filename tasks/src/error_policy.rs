//! Harbor 0.26's error policy: what an exception type means for a trial there (retried?
//! graded? is its reward valid?), keyed by the type's name as Harbor records it
//! (`harbor/models/trial/error_policy.py`). Runner writes the policy into each recorded
//! exception (`exception_info.policy`) and the trial's `reward_valid`, as 0.26 computes them,
//! so 0.26's tools read runner's records as their own. Runner's own classification
//! (`outcome`: an agent-caused failure is never infrastructure) is recorded beside it; where
//! the two differ, the README says how.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What Harbor 0.26 does with a trial that ended in an exception of one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorPolicy {
    /// Harbor retries the trial (unless the job's retry config says otherwise).
    pub should_retry: bool,
    /// Harbor still runs the verifier after it.
    pub should_grade: bool,
    /// A reward recorded despite it counts.
    pub has_valid_reward: bool,
}

const fn policy(should_retry: bool, should_grade: bool, has_valid_reward: bool) -> ErrorPolicy {
    ErrorPolicy {
        should_retry,
        should_grade,
        has_valid_reward,
    }
}

/// Harbor's policy for a type it does not list: retried, graded, reward valid.
pub const UNKNOWN: ErrorPolicy = policy(true, true, true);

/// Harbor 0.26's table, group by group (the types are Harbor's names, several raised only by
/// its own agents and model clients).
const GROUPS: &[(ErrorPolicy, &[&str])] = &[
    (
        policy(true, false, false),
        &[
            "EnvironmentStartTimeoutError",
            "SandboxBuildFailedError",
            "AgentSetupTimeoutError",
            "HealthcheckError",
            "SandboxLikelyOutOfMemoryError",
            "MemoryLimitExceededError",
            "SSHAccessError",
            "GKEExecStreamClosedError",
            "GKEPodNotFoundError",
            "RuntimeRequestError",
            "AddTestsDirError",
            "DownloadVerifierDirError",
        ],
    ),
    (
        policy(true, true, false),
        &[
            "ApiError",
            "ApiRateLimitError",
            "ApiInternalServerError",
            "ApiOverloadedError",
            "ApiConnectionClosedError",
            "ApiResponseStalledError",
            "UnknownApiError",
            "NetworkConnectionError",
            "ApiConnectionError",
            "ApiUsageLimitError",
            "RateLimitError",
            "InternalServerError",
            "ServiceUnavailableError",
            "APIConnectionError",
            "APIError",
            "Timeout",
        ],
    ),
    (
        policy(false, true, false),
        &[
            "UnsupportedModelParametersError",
            "BadRequestError",
            "UnprocessableEntityError",
            "UnsupportedParamsError",
            "APIResponseValidationError",
            "BudgetExceededError",
            "VerifierTimeoutError",
            "RewardFileNotFoundError",
            "RewardFileEmptyError",
            "VerifierOutputParseError",
        ],
    ),
    (
        policy(false, false, false),
        &[
            "AgentAuthenticationError",
            "ModelNotFoundError",
            "ApiProviderResourceNotFoundError",
            "AuthenticationError",
            "PermissionDeniedError",
            "NotFoundError",
            "ServiceOperationsUnsupportedError",
            "VercelScopeError",
            "DspyImportError",
            "MissingExtraError",
            "RegradeError",
            "CancelledError",
        ],
    ),
    (
        policy(false, true, true),
        &[
            "NonZeroAgentExitCodeError",
            "AgentTimeoutError",
            "ContextWindowExceededError",
            "OutputTokenExceededError",
            "ContextLengthExceededError",
            "OutputLengthExceededError",
            "AgentSafetyRefusalError",
            "ContentPolicyViolationError",
        ],
    ),
];

/// Harbor 0.26's policy for the exception type named `name` ([`UNKNOWN`] for types it does not
/// list, runner's own among them).
pub fn policy_for(name: &str) -> ErrorPolicy {
    GROUPS
        .iter()
        .find(|(_, names)| names.contains(&name))
        .map_or(UNKNOWN, |(policy, _)| *policy)
}

/// Whether Harbor 0.26 lists `name` at all.
pub fn is_listed(name: &str) -> bool {
    GROUPS.iter().any(|(_, names)| names.contains(&name))
}

/// The types Harbor 0.26 does not retry by default (`RetryConfig.exclude_exceptions`, written
/// into every job config it saves): those its policy says not to retry.
pub fn default_retry_exclusions() -> impl Iterator<Item = &'static str> {
    GROUPS
        .iter()
        .filter(|(policy, _)| !policy.should_retry)
        .flat_map(|(_, names)| names.iter().copied())
}

/// One entry of a config's `override_error_policy` (Harbor 0.26's `ErrorPolicyOverride`):
/// the parts of a type's [`ErrorPolicy`] it replaces, the others (`null`) kept. Unknown keys are
/// refused, as Harbor refuses them. Written with all three keys, as 0.26 writes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorPolicyOverride {
    /// Retry the type or not. Applied to the job's `retry.exclude_exceptions` unless the
    /// config gave that list itself (see `RetryPolicy` in the engine).
    #[serde(default)]
    pub should_retry: Option<bool>,
    /// Verify after the type or not (runner honours it after an agent failure; see the engine's
    /// `TrialFailure::continues_to_verification`).
    #[serde(default)]
    pub should_grade: Option<bool>,
    /// Whether a reward recorded despite the type counts (`reward_valid`).
    #[serde(default)]
    pub has_valid_reward: Option<bool>,
}

impl ErrorPolicyOverride {
    /// `policy` with this override's set parts in place of its own.
    pub fn apply(&self, policy: ErrorPolicy) -> ErrorPolicy {
        ErrorPolicy {
            should_retry: self.should_retry.unwrap_or(policy.should_retry),
            should_grade: self.should_grade.unwrap_or(policy.should_grade),
            has_valid_reward: self.has_valid_reward.unwrap_or(policy.has_valid_reward),
        }
    }
}

/// A config's `override_error_policy`: exception type name → override.
pub type ErrorPolicyOverrides = BTreeMap<String, ErrorPolicyOverride>;

/// Harbor 0.26's policy for `name` with `overrides` applied (its `policy_for(type, override)`).
pub fn policy_with(name: &str, overrides: &ErrorPolicyOverrides) -> ErrorPolicy {
    let policy = policy_for(name);
    overrides
        .get(name)
        .map_or(policy, |override_| override_.apply(policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_replaces_only_the_parts_it_sets() {
        let overrides: ErrorPolicyOverrides = serde_json::from_str(
            r#"{"AgentTimeoutError": {"has_valid_reward": false},
                "HealthcheckError": {"should_retry": false, "should_grade": null}}"#,
        )
        .unwrap();
        assert_eq!(
            policy_with("AgentTimeoutError", &overrides),
            policy(false, true, false)
        );
        assert_eq!(
            policy_with("HealthcheckError", &overrides),
            policy(false, false, false)
        );
        assert_eq!(
            policy_with("VerifierTimeoutError", &overrides),
            policy_for("VerifierTimeoutError")
        );
        // Written back with every key, as Harbor writes it.
        assert_eq!(
            serde_json::to_value(overrides["AgentTimeoutError"]).unwrap(),
            serde_json::json!({"should_retry": null, "should_grade": null, "has_valid_reward": false})
        );
    }

    #[test]
    fn an_override_with_an_unknown_key_is_refused() {
        let err =
            serde_json::from_str::<ErrorPolicyOverride>(r#"{"should_regrade": true}"#).unwrap_err();
        assert!(err.to_string().contains("should_regrade"), "{err}");
    }

    #[test]
    fn harbors_groups_read_as_harbor_reads_them() {
        assert_eq!(policy_for("AgentTimeoutError"), policy(false, true, true));
        assert_eq!(
            policy_for("VerifierTimeoutError"),
            policy(false, true, false)
        );
        assert_eq!(policy_for("CancelledError"), policy(false, false, false));
        assert_eq!(policy_for("HealthcheckError"), policy(true, false, false));
        assert_eq!(policy_for("RunnerPausedError"), UNKNOWN);
        // Harbor 0.26 writes 30 default exclusions into each job config.
        assert_eq!(default_retry_exclusions().count(), 30);
        assert!(default_retry_exclusions().all(|name| !policy_for(name).should_retry));
    }
}
