//! Job statistics from trial results: Harbor's `JobStats` with evals, mean, pass@k, reward and
//! exception tables. Pure functions over records.

use std::collections::BTreeMap;

use tasks::ExceptionType;
use tasks::metrics;
use tasks::records::{EvalStats, JobStats, TrialTotals};

/// Formats a reward value as Python's `str(float)` does for the usual cases (`1.0`, `0.5`).
pub fn reward_label(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// Statistics over finished trials.
pub fn job_stats(results: &[TrialTotals]) -> JobStats {
    let mut stats = JobStats {
        n_completed_trials: results.len() as u32,
        ..JobStats::default()
    };
    let mut by_eval: BTreeMap<&str, Vec<&TrialTotals>> = BTreeMap::new();
    for result in results {
        if let Some(kind) = result.exception_type() {
            stats.n_errored_trials += 1;
            if *kind == ExceptionType::CancelledError {
                stats.n_cancelled_trials += 1;
            }
        }
        by_eval.entry(&result.eval_key).or_default().push(result);
        if let Some(usage) = &result.usage {
            add(&mut stats.n_input_tokens, usage.n_input_tokens);
            add(&mut stats.n_cache_tokens, usage.n_cache_tokens);
            add(&mut stats.n_output_tokens, usage.n_output_tokens);
            if let Some(cost) = usage.cost_usd {
                stats.cost_usd = Some(stats.cost_usd.unwrap_or(0.0) + cost);
            }
        }
    }
    stats.evals = by_eval
        .into_iter()
        .map(|(key, trials)| (key.to_owned(), eval_stats(&trials)))
        .collect();
    stats
}

fn add(total: &mut Option<u64>, value: Option<u64>) {
    if let Some(v) = value {
        *total = Some(total.unwrap_or(0) + v);
    }
}

fn eval_stats(trials: &[&TrialTotals]) -> EvalStats {
    let mut eval = EvalStats::default();
    let mut per_task: BTreeMap<&str, Vec<Option<f64>>> = BTreeMap::new();
    let mut keys: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for trial in trials {
        if trial.rewards.is_some() {
            eval.n_trials += 1;
        }
        if let Some(kind) = trial.exception_type() {
            eval.n_errors += 1;
            eval.exception_stats
                .entry(kind.to_string())
                .or_default()
                .push(trial.trial_name.clone());
        }
        per_task
            .entry(&trial.task_name)
            .or_default()
            .push(trial.reward());
        for (name, value) in trial.rewards.iter().flat_map(|r| r.iter()) {
            keys.entry(name).or_default().push(*value);
            eval.reward_stats
                .entry(name.to_string())
                .or_default()
                .entry(reward_label(*value))
                .or_default()
                .push(trial.trial_name.clone());
        }
    }
    let main: Vec<Option<f64>> = trials.iter().map(|t| t.reward()).collect();
    let mut metric = BTreeMap::from([("mean".to_owned(), metrics::mean(&main))]);
    if keys.len() > 1 {
        // Several reward names: also the mean of each over all trials (missing counts as 0).
        for (name, values) in &keys {
            metric.insert(
                name.to_string(),
                values.iter().sum::<f64>() / trials.len() as f64,
            );
        }
    }
    eval.metrics = vec![metric];
    eval.pass_at_k = metrics::pass_at_k(per_task.values().map(Vec::as_slice))
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    eval
}

#[cfg(test)]
mod tests {
    use super::*;
    use tasks::records::TrialResult;
    use testkit::records::trial_result as trial;

    fn totals(records: &[TrialResult]) -> Vec<TrialTotals> {
        records.iter().map(TrialTotals::from).collect()
    }

    #[test]
    fn stats_count_errors_as_zero_and_compute_pass_at_k() {
        let trials = totals(&[
            trial("a1", "a", Some(1.0), None),
            trial("a2", "a", Some(0.0), Some("AgentTimeoutError")),
            trial("b1", "b", None, Some("EnvironmentStartError")),
            trial("b2", "b", Some(1.0), None),
        ]);
        let stats = job_stats(&trials);
        assert_eq!(stats.n_completed_trials, 4);
        assert_eq!(stats.n_errored_trials, 2);
        let eval = &stats.evals["oracle__ds"];
        assert_eq!(eval.n_trials, 3);
        assert_eq!(eval.n_errors, 2);
        assert_eq!(eval.metrics[0]["mean"], 0.5);
        // Each task: n=2, c=1 → pass@2 = 1.
        assert_eq!(eval.pass_at_k["2"], 1.0);
        assert_eq!(eval.reward_stats["reward"]["1.0"], vec!["a1", "b2"]);
        assert_eq!(eval.exception_stats["EnvironmentStartError"], vec!["b1"]);
    }

    #[test]
    fn the_totals_a_job_keeps_count_tokens_cost_and_cancellations() {
        let mut with_tokens = trial("c1", "c", Some(0.5), None);
        with_tokens.agent_result = Some(tasks::records::AgentContext {
            n_input_tokens: Some(120),
            n_output_tokens: Some(30),
            cost_usd: Some(0.25),
            metadata: Some(serde_json::Map::from_iter([(
                "big".into(),
                "x".repeat(4096).into(),
            )])),
            ..Default::default()
        });
        let whole = [
            trial("a1", "a", Some(1.0), None),
            trial("a2", "a", Some(0.0), Some("AgentTimeoutError")),
            trial("b1", "b", None, Some("CancelledError")),
            with_tokens.clone(),
            with_tokens,
        ];
        let kept = totals(&whole);
        let stats = job_stats(&kept);
        assert_eq!(
            (
                stats.n_input_tokens,
                stats.n_cache_tokens,
                stats.n_output_tokens
            ),
            (Some(240), None, Some(60))
        );
        assert_eq!(stats.cost_usd, Some(0.5));
        assert_eq!((stats.n_errored_trials, stats.n_cancelled_trials), (2, 1));
        for (kept, whole) in kept.iter().zip(&whole) {
            assert_eq!(kept.reward(), whole.reward());
            assert_eq!(kept.outcome, whole.outcome());
            assert_eq!(&*kept.eval_key, tasks::records::eval_key(whole));
        }
        assert!(kept[0].usage.is_none(), "no usage reported, none kept");
    }

    #[test]
    fn reward_labels_match_python_floats() {
        assert_eq!(reward_label(1.0), "1.0");
        assert_eq!(reward_label(0.0), "0.0");
        assert_eq!(reward_label(0.25), "0.25");
    }
}
