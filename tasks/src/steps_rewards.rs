//! Harbor 0.13.1's reward rules for multi-step trials (`harbor/trial/multi_step.py`): when a
//! step stops the trial (a failure without rewards, or rewards below its `min_reward`), and
//! how the steps' rewards make the trial's `verifier_result`.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{MinReward, MultiStepRewardStrategy, StepConfig};
use crate::records::{StepResult, VerifierResult};

/// Why `rewards` miss the gate `min_reward`, or `None` when they pass. A number gates the
/// `reward` key; a table gates each of its keys. A missing key (or no rewards at all, as
/// after a verifier failure) counts as minus infinity, so it always fails.
pub fn min_reward_failure(
    rewards: Option<&BTreeMap<String, f64>>,
    min_reward: &MinReward,
) -> Option<String> {
    let thresholds: Vec<(&str, f64)> = match min_reward {
        MinReward::Threshold(value) => vec![("reward", *value)],
        MinReward::PerKey(table) => table.iter().map(|(k, v)| (k.as_str(), *v)).collect(),
    };
    thresholds.into_iter().find_map(|(key, threshold)| {
        let actual = rewards
            .and_then(|r| r.get(key))
            .copied()
            .unwrap_or(f64::NEG_INFINITY);
        // NaN compares false both ways; Harbor's `actual < threshold` lets it pass, and so do we.
        (actual < threshold).then(|| format!("{key}={actual} below min_reward {threshold}"))
    })
}

/// Why the trial stops after `step` ended as `result`, or `None` to go on: a step that failed
/// without a verifier result stops it, and so do rewards below the step's `min_reward`.
pub fn stop_after_step(step: &StepConfig, result: &StepResult) -> Option<String> {
    if result.exception_info.is_some() && result.verifier_result.is_none() {
        return Some(format!(
            "step {:?} failed, aborting remaining steps",
            step.name
        ));
    }
    let min_reward = step.min_reward.as_ref()?;
    min_reward_failure(result.rewards(), min_reward)
        .map(|failure| format!("step {:?} {failure}, aborting remaining steps", step.name))
}

/// The trial's `verifier_result` from the steps that ran: with `final`, the last step's
/// result as it is; otherwise (`mean`, Harbor's default) the per-key mean over the steps that
/// have a verifier result, a key a step lacks counting 0 for it. `None` when no step has a
/// reward.
pub fn aggregate(
    strategy: Option<MultiStepRewardStrategy>,
    steps: &[StepResult],
) -> Option<VerifierResult> {
    if strategy == Some(MultiStepRewardStrategy::Final) {
        return steps.last()?.verifier_result.clone();
    }
    let rewarded: Vec<&BTreeMap<String, f64>> = steps
        .iter()
        .filter_map(|s| s.verifier_result.as_ref())
        .map(|v| v.rewards.as_ref().unwrap_or(&EMPTY))
        .collect();
    let keys: BTreeSet<&String> = rewarded.iter().flat_map(|r| r.keys()).collect();
    if keys.is_empty() {
        return None;
    }
    let count = rewarded.len() as f64;
    let rewards = keys
        .into_iter()
        .map(|key| {
            let sum: f64 = rewarded
                .iter()
                .map(|r| r.get(key).copied().unwrap_or(0.0))
                .sum();
            (key.clone(), sum / count)
        })
        .collect();
    Some(VerifierResult {
        rewards: Some(rewards),
        ..VerifierResult::default()
    })
}

static EMPTY: BTreeMap<String, f64> = BTreeMap::new();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ExceptionInfo;

    fn rewards(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn step(name: &str, pairs: Option<&[(&str, f64)]>) -> StepResult {
        let mut result = StepResult::new(name);
        result.verifier_result = pairs.map(|p| VerifierResult {
            rewards: Some(rewards(p)),
            ..VerifierResult::default()
        });
        result
    }

    fn failed(mut result: StepResult) -> StepResult {
        result.exception_info = Some(ExceptionInfo {
            exception_type: crate::ExceptionType::VerifierTimeoutError,
            exception_message: "late".into(),
            exception_traceback: String::new(),
            occurred_at: chrono::Utc::now(),
            policy: None,
            policy_override: None,
        });
        result
    }

    fn config(min_reward: Option<MinReward>) -> StepConfig {
        StepConfig {
            name: "s".into(),
            agent: Default::default(),
            verifier: Default::default(),
            min_reward,
            healthcheck: None,
            artifacts: Vec::new(),
        }
    }

    #[test]
    fn a_number_gates_the_reward_key_and_a_missing_key_is_minus_infinity() {
        let gate = MinReward::Threshold(0.5);
        assert_eq!(
            min_reward_failure(Some(&rewards(&[("reward", 0.5)])), &gate),
            None
        );
        assert_eq!(
            min_reward_failure(Some(&rewards(&[("reward", 0.4)])), &gate).as_deref(),
            Some("reward=0.4 below min_reward 0.5")
        );
        assert_eq!(
            min_reward_failure(Some(&rewards(&[("other", 1.0)])), &gate).as_deref(),
            Some("reward=-inf below min_reward 0.5")
        );
        assert!(min_reward_failure(None, &gate).is_some());
    }

    #[test]
    fn a_table_gates_each_of_its_keys() {
        let gate = MinReward::PerKey(rewards(&[("a", 1.0), ("b", 0.5)]));
        let good = rewards(&[("a", 1.0), ("b", 0.7), ("reward", 0.0)]);
        assert_eq!(min_reward_failure(Some(&good), &gate), None);
        let bad = rewards(&[("a", 1.0), ("b", 0.2)]);
        assert_eq!(
            min_reward_failure(Some(&bad), &gate).as_deref(),
            Some("b=0.2 below min_reward 0.5")
        );
        assert!(min_reward_failure(Some(&rewards(&[("a", 1.0)])), &gate).is_some());
    }

    #[test]
    fn a_step_stops_the_trial_when_it_failed_without_rewards_or_missed_its_gate() {
        let ungated = config(None);
        assert_eq!(
            stop_after_step(&ungated, &step("s", Some(&[("reward", 0.0)]))),
            None
        );
        let broken = failed(step("s", None));
        assert!(
            stop_after_step(&ungated, &broken)
                .unwrap()
                .contains("failed")
        );
        // A failure that still produced rewards (an agent timeout, then verified) goes on.
        let timed_out = failed(step("s", Some(&[("reward", 1.0)])));
        assert_eq!(stop_after_step(&ungated, &timed_out), None);
        let gated = config(Some(MinReward::Threshold(1.0)));
        assert_eq!(
            stop_after_step(&gated, &step("s", Some(&[("reward", 1.0)]))),
            None
        );
        let missed = stop_after_step(&gated, &step("s", Some(&[("reward", 0.0)]))).unwrap();
        assert_eq!(
            missed,
            "step \"s\" reward=0 below min_reward 1, aborting remaining steps"
        );
    }

    #[test]
    fn mean_averages_each_key_over_the_steps_with_results_counting_missing_keys_as_zero() {
        let steps = [
            step("a", Some(&[("reward", 1.0), ("style", 1.0)])),
            step("b", Some(&[("reward", 0.0)])),
            failed(step("c", None)),
        ];
        let result = aggregate(None, &steps).unwrap();
        assert_eq!(
            result.rewards,
            Some(rewards(&[("reward", 0.5), ("style", 0.5)]))
        );
        let same = aggregate(Some(MultiStepRewardStrategy::Mean), &steps).unwrap();
        assert_eq!(same, result);
    }

    #[test]
    fn mean_has_no_result_without_any_reward() {
        assert_eq!(aggregate(None, &[]), None);
        assert_eq!(aggregate(None, &[failed(step("a", None))]), None);
        assert_eq!(aggregate(None, &[step("a", Some(&[]))]), None);
    }

    #[test]
    fn final_takes_the_last_step_that_ran_as_it_is() {
        let steps = [
            step("a", Some(&[("reward", 1.0)])),
            step("b", Some(&[("reward", 0.25)])),
        ];
        let result = aggregate(Some(MultiStepRewardStrategy::Final), &steps).unwrap();
        assert_eq!(result.rewards, Some(rewards(&[("reward", 0.25)])));
        let stopped = [step("a", Some(&[("reward", 1.0)])), failed(step("b", None))];
        assert_eq!(
            aggregate(Some(MultiStepRewardStrategy::Final), &stopped),
            None
        );
    }
}
