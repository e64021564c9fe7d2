//! Which failed trials run again, and after how long.
//!
//! Only infrastructure errors are retried by default: an agent error or an agent timeout is a
//! result (0 on leaderboards), and re-running it until it passes would inflate the score.
//! `--retry-include` replaces that rule with an explicit list; `--retry-exclude` (Harbor's
//! default list unless given) always wins. Names may be exception families
//! ([`tasks::ExceptionFamily`]), expanded here once, so the recorded lists are exact names
//! Harbor's own matcher understands too.

use std::time::Duration;

use tasks::error_policy::ErrorPolicyOverrides;
use tasks::records::RetryConfig;
use tasks::{Blame, ExceptionType, UnknownExceptionName};

/// The retry rules of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries per trial within one run of the job (a resume grants them again).
    pub max_retries: u32,
    /// Only these types are retried, when set; otherwise every infrastructure error.
    pub include: Option<Vec<ExceptionType>>,
    /// These types are never retried.
    pub exclude: Vec<ExceptionType>,
    /// The wait before the first retry (before jitter).
    pub min_wait: Duration,
    /// The longest wait.
    pub max_wait: Duration,
    /// Each retry waits this many times longer than the one before.
    pub multiplier: f64,
}

impl RetryPolicy {
    /// `--max-retries` when not given: two, because only infrastructure errors are retried
    /// (so a retry never re-rolls an agent's result) and two cover the transient engine and
    /// registry hiccups of a long run without hiding a fault that persists.
    pub const DEFAULT_MAX_RETRIES: u32 = 2;

    /// Harbor's default `exclude_exceptions`, plus `VerifierEnvError` (a host variable the
    /// verifier needs is unset: retrying cannot help).
    pub fn default_exclude() -> Vec<ExceptionType> {
        let mut exclude = RetryConfig::default().exclude_exceptions;
        exclude.push(ExceptionType::VerifierEnvError);
        exclude
    }

    /// The policy of `--max-retries`, `--retry-include` and `--retry-exclude` (`None`: not
    /// given, so the default list applies, minus any type the user included by name).
    pub fn new(
        max_retries: u32,
        include: &[String],
        exclude: Option<&[String]>,
    ) -> Result<RetryPolicy, UnknownExceptionName> {
        let include = if include.is_empty() {
            None
        } else {
            Some(expand(include)?)
        };
        let exclude = match exclude {
            Some(names) => expand(names)?,
            None => Self::default_exclude()
                .into_iter()
                .filter(|kind| !include.as_ref().is_some_and(|inc| inc.contains(kind)))
                .collect(),
        };
        Ok(RetryPolicy {
            max_retries,
            include,
            exclude,
            min_wait: Duration::from_secs(1),
            max_wait: Duration::from_secs(60),
            multiplier: 2.0,
        })
    }

    /// Applies a job's `override_error_policy` as Harbor 0.26 applies it to its retry config:
    /// unless the job gave `exclude_exceptions` itself (`exclude_given`; a job's own
    /// `config.json` records the list already edited), `should_retry: false` adds the type to
    /// the exclusions and `true` removes it. (`true` for a type runner blames on the agent is
    /// refused earlier, [`crate::error_overrides::check`]: runner retries infrastructure errors
    /// only.)
    pub fn apply_overrides(&mut self, overrides: &ErrorPolicyOverrides, exclude_given: bool) {
        if exclude_given {
            return;
        }
        for (name, entry) in overrides {
            let kind = ExceptionType::from_name(name);
            match entry.should_retry {
                Some(false) if !self.exclude.contains(&kind) => self.exclude.push(kind),
                Some(true) => self.exclude.retain(|k| *k != kind),
                _ => {}
            }
        }
    }

    /// No retries at all.
    pub fn none() -> RetryPolicy {
        RetryPolicy::new(0, &[], None).expect("the defaults are known names")
    }

    /// True when a trial that ended with `kind` may run again. An interruption never is: the
    /// run is ending.
    pub fn should_retry(&self, kind: &ExceptionType) -> bool {
        if *kind == ExceptionType::CancelledError || self.exclude.contains(kind) {
            return false;
        }
        match &self.include {
            Some(include) => include.contains(kind),
            None => kind.blame() == Blame::Infrastructure,
        }
    }

    /// The wait before retry number `retry` (from 1): `min_wait × multiplier^(retry−1)`, at
    /// most `max_wait`, scaled by `0.5 + jitter / 2` (`jitter` in 0..1) so trials that failed
    /// together do not retry together.
    pub fn backoff(&self, retry: u32, jitter: f64) -> Duration {
        let exponent = retry.saturating_sub(1).min(64) as i32;
        let base = self.min_wait.as_secs_f64() * self.multiplier.max(1.0).powi(exponent);
        let capped = base.min(self.max_wait.as_secs_f64());
        Duration::from_secs_f64(capped * (0.5 + jitter.clamp(0.0, 1.0) / 2.0))
    }

    /// The job config's `retry` record.
    pub fn record(&self) -> RetryConfig {
        RetryConfig {
            max_retries: self.max_retries,
            include_exceptions: self.include.clone(),
            exclude_exceptions: self.exclude.clone(),
            wait_multiplier: self.multiplier,
            min_wait_sec: self.min_wait.as_secs_f64(),
            max_wait_sec: self.max_wait.as_secs_f64(),
        }
    }
}

/// A random number in 0..1 for the jitter (from the OS generator uuid already uses).
pub fn jitter() -> f64 {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let n = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    f64::from(n) / f64::from(u32::MAX)
}

fn expand(names: &[String]) -> Result<Vec<ExceptionType>, UnknownExceptionName> {
    let mut kinds = Vec::new();
    for name in names {
        for kind in ExceptionType::expand_pattern(name)? {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }
    Ok(kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn by_default_only_infrastructure_errors_are_retried() {
        let policy = RetryPolicy::new(2, &[], None).unwrap();
        assert!(policy.should_retry(&ExceptionType::EnvironmentStartError));
        assert!(policy.should_retry(&ExceptionType::SandboxBuildFailedError));
        assert!(policy.should_retry(&ExceptionType::RunnerPausedError));
        assert!(!policy.should_retry(&ExceptionType::AgentTimeoutError));
        assert!(!policy.should_retry(&ExceptionType::NonZeroAgentExitCodeError));
        assert!(!policy.should_retry(&ExceptionType::CancelledError));
        assert!(!policy.should_retry(&ExceptionType::VerifierEnvError));
    }

    #[test]
    fn an_explicit_include_retries_agent_errors_and_families_match_members() {
        let policy = RetryPolicy::new(1, &names(&["AgentTimeoutError"]), None).unwrap();
        assert!(policy.should_retry(&ExceptionType::AgentTimeoutError));
        assert!(!policy.should_retry(&ExceptionType::EnvironmentStartError));
        let policy = RetryPolicy::new(1, &[], Some(&names(&["EnvironmentError"]))).unwrap();
        assert!(!policy.should_retry(&ExceptionType::EnvironmentStartError));
        assert!(!policy.should_retry(&ExceptionType::SandboxBuildFailedError));
        assert!(policy.should_retry(&ExceptionType::VerifierSandboxError));
        let record = policy.record();
        assert!(
            record
                .exclude_exceptions
                .contains(&ExceptionType::HealthcheckError),
            "the recorded list holds every member by name"
        );
        assert!(RetryPolicy::new(1, &names(&["NoSuchError"]), None).is_err());
    }

    fn overrides(json: &str) -> ErrorPolicyOverrides {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn should_retry_overrides_edit_the_default_exclusions_as_harbor_does() {
        let o = overrides(
            r#"{"VerifierEnvError": {"should_retry": true},
                "EnvironmentStartError": {"should_retry": false},
                "HealthcheckError": {"should_grade": false}}"#,
        );
        let mut policy = RetryPolicy::new(2, &[], None).unwrap();
        assert!(!policy.should_retry(&ExceptionType::VerifierEnvError));
        policy.apply_overrides(&o, false);
        // Excluded by default (an unset host variable stays unset); the override lifts it.
        assert!(policy.should_retry(&ExceptionType::VerifierEnvError));
        // An infrastructure error made non-retried, recorded in the exclusions.
        assert!(!policy.should_retry(&ExceptionType::EnvironmentStartError));
        let record = policy.record();
        assert!(
            record
                .exclude_exceptions
                .contains(&ExceptionType::EnvironmentStartError)
        );
        assert!(
            !record
                .exclude_exceptions
                .contains(&ExceptionType::VerifierEnvError)
        );
        // An entry without should_retry changes no retry.
        assert!(policy.should_retry(&ExceptionType::HealthcheckError));
    }

    #[test]
    fn explicit_exclusions_win_over_should_retry_overrides() {
        let o = overrides(
            r#"{"VerifierEnvError": {"should_retry": true},
                "EnvironmentStartError": {"should_retry": false}}"#,
        );
        let given = names(&["VerifierEnvError"]);
        let mut policy = RetryPolicy::new(2, &[], Some(&given)).unwrap();
        policy.apply_overrides(&o, true);
        assert!(!policy.should_retry(&ExceptionType::VerifierEnvError));
        assert!(policy.should_retry(&ExceptionType::EnvironmentStartError));
    }

    #[test]
    fn backoff_grows_exponentially_within_bounds_and_jitter() {
        let policy = RetryPolicy::new(5, &[], None).unwrap();
        assert_eq!(policy.backoff(1, 1.0), Duration::from_secs(1));
        assert_eq!(policy.backoff(1, 0.0), Duration::from_millis(500));
        assert_eq!(policy.backoff(3, 1.0), Duration::from_secs(4));
        assert_eq!(policy.backoff(30, 1.0), Duration::from_secs(60));
        let j = jitter();
        assert!((0.0..=1.0).contains(&j));
    }
}
