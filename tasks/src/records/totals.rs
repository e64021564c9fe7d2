//! [`TrialTotals`]: what a job keeps in memory of a finished trial, for result.json's
//! statistics and the end-of-job summary. The whole record is on disk (the trial's
//! result.json); a [`TrialResult`] is over 2 KB before any of its strings, so a job of 10,000
//! trials that kept them held tens of MB. The totals are about a hundred bytes and the trial's
//! name: the strings every trial of a task or eval shares (task name, eval key, reward names)
//! are held once, through [`SharedNames`].

use std::collections::HashSet;
use std::sync::Arc;

use super::TrialResult;
use crate::{ExceptionType, TrialOutcome};

/// A finished trial's totals (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct TrialTotals {
    /// The trial's name (its directory's).
    pub trial_name: String,
    /// The task's name.
    pub task_name: Arc<str>,
    /// Harbor's eval key (see [`eval_key`]).
    pub eval_key: Arc<str>,
    /// The verifier's rewards in the record's (name) order; `None` when there were none
    /// (`Some` of none is a verifier that reported an empty map, which Harbor counts).
    pub rewards: Option<Rewards>,
    /// The final exception, if any.
    pub exception: Option<Box<TotalsException>>,
    /// Tokens and cost, when the agent reported any.
    pub usage: Option<Box<TrialUsage>>,
    /// Attempts the trial took (1 without retries).
    pub attempts: u32,
    /// How the trial ended ([`TrialResult::outcome`]).
    pub outcome: TrialOutcome,
}

/// Reward name → value, in name order, the names shared.
pub type Rewards = Box<[(Arc<str>, f64)]>;

/// A finished trial's exception, as the totals keep it.
#[derive(Debug, Clone, PartialEq)]
pub struct TotalsException {
    /// Harbor's exception class.
    pub exception_type: ExceptionType,
    /// The first line of the message (the summary shows no more; the record has it all).
    pub first_line: String,
}

/// Tokens and cost an agent reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrialUsage {
    /// Input tokens.
    pub n_input_tokens: Option<u64>,
    /// Cached input tokens.
    pub n_cache_tokens: Option<u64>,
    /// Output tokens.
    pub n_output_tokens: Option<u64>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
}

/// Strings shared by many trials, each held once.
#[derive(Debug, Default)]
pub struct SharedNames(HashSet<Arc<str>>);

impl SharedNames {
    /// The one copy of `name`.
    pub fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        self.0.insert(shared.clone());
        shared
    }
}

/// Harbor's eval key: `agent__model__source` (or `agent__source` without a model).
pub fn eval_key(result: &TrialResult) -> String {
    let source = result.source.as_deref().unwrap_or("adhoc");
    match &result.agent_info.model_info {
        Some(model) => format!("{}__{}__{source}", result.agent_info.name, model.name),
        None => format!("{}__{source}", result.agent_info.name),
    }
}

impl TrialTotals {
    /// The totals of `result`, its shared strings taken from `names`.
    pub fn of(result: &TrialResult, names: &mut SharedNames) -> TrialTotals {
        let rewards = result
            .verifier_result
            .as_ref()
            .and_then(|v| v.rewards.as_ref())
            .map(|rewards| {
                rewards
                    .iter()
                    .map(|(name, value)| (names.get(name), *value))
                    .collect()
            });
        let exception = result.exception_info.as_ref().map(|e| {
            Box::new(TotalsException {
                exception_type: e.exception_type.clone(),
                first_line: crate::exception::first_line(&e.exception_message).to_owned(),
            })
        });
        let usage = result
            .agent_result
            .as_ref()
            .map(|c| TrialUsage {
                n_input_tokens: c.n_input_tokens,
                n_cache_tokens: c.n_cache_tokens,
                n_output_tokens: c.n_output_tokens,
                cost_usd: c.cost_usd,
            })
            .filter(|u| *u != TrialUsage::default())
            .map(Box::new);
        TrialTotals {
            trial_name: result.trial_name.clone(),
            task_name: names.get(&result.task_name),
            eval_key: names.get(&eval_key(result)),
            rewards,
            exception,
            usage,
            attempts: result.attempt_count(),
            outcome: result.outcome(),
        }
    }

    /// The main reward (see [`crate::metrics::main_reward`]); `None` when unscored.
    pub fn reward(&self) -> Option<f64> {
        let rewards = self.rewards.as_deref()?;
        crate::metrics::main_reward(rewards.iter().map(|(name, value)| (&**name, *value)))
    }

    /// The final exception's type.
    pub fn exception_type(&self) -> Option<&ExceptionType> {
        self.exception.as_ref().map(|e| &e.exception_type)
    }
}

impl From<&TrialResult> for TrialTotals {
    /// The totals of one record on its own (nothing shared with other trials).
    fn from(result: &TrialResult) -> TrialTotals {
        TrialTotals::of(result, &mut SharedNames::default())
    }
}
