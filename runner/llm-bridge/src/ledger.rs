//! Budgets under concurrency: a call reserves what it may spend before it is forwarded and
//! settles what it did spend when it ends.
//!
//! A call is admitted while what is spent plus what calls in flight hold stays below every
//! limit (the trial's and the job's), and admitting it adds its hold: its request's size in
//! bytes as input tokens (an upper bound of the tokens of any text) plus its output cap
//! (`max_tokens` or the model's cap), priced like a call. So 32 calls arriving at once at the
//! edge of a budget cannot all pass the check before any of them is counted: the total stays
//! within one call of the budget. Settling removes the hold and counts the call: its reported
//! usage when the call ended whole, else (an aborted or cut-off stream, no usage reported) a
//! charge of its reported input, or the hold's, and its output cap.
//!
//! One lock (the job's holds) orders every admission and settlement of the job, so the check
//! and the hold are one step; calls are few per second, the lock is never held across I/O.

use crate::policy::{Spend, budget_refusal};
use crate::prices::ModelPrice;
use crate::summary::{SettledCall, record_call, spend};
use crate::trial::TrialState;
use crate::usage::Usage;

/// What one admitted call holds of the budgets until it settles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Hold {
    /// The tokens it may use: input (by size) and output (by its cap).
    pub usage: Usage,
    /// Those tokens priced (0 for an unpriced model).
    pub spend: Spend,
}

impl Hold {
    /// The hold of a request of `request_bytes` bytes that may produce `output_cap` tokens.
    pub fn new(request_bytes: u64, output_cap: u64, price: Option<&ModelPrice>) -> Hold {
        let usage = Usage {
            n_input_tokens: request_bytes,
            n_cache_tokens: 0,
            n_cache_write_tokens: 0,
            n_output_tokens: output_cap,
        };
        Hold {
            usage,
            spend: Spend {
                tokens: usage.total_tokens(),
                cost_usd: price.map_or(0.0, |p| p.cost_usd(&usage)),
            },
        }
    }
}

fn add(a: Spend, b: Spend) -> Spend {
    Spend {
        tokens: a.tokens.saturating_add(b.tokens),
        cost_usd: a.cost_usd + b.cost_usd,
    }
}

fn sub(a: Spend, b: Spend) -> Spend {
    Spend {
        tokens: a.tokens.saturating_sub(b.tokens),
        cost_usd: (a.cost_usd - b.cost_usd).max(0.0),
    }
}

/// What a finished call is counted as: its reported usage when it ended whole with one, else
/// (cut off, aborted, no usage) its reported input or the hold's, and the larger of its
/// reported output and the hold's output cap. The flag says the charge is such an estimate.
pub(crate) fn charge(reported: Option<Usage>, whole: bool, hold: &Hold) -> (Usage, bool) {
    match reported {
        Some(usage) if whole => (usage, false),
        _ => {
            let reported = reported.unwrap_or_default();
            let input = if reported.n_input_tokens > 0 {
                reported.n_input_tokens
            } else {
                hold.usage.n_input_tokens
            };
            (
                Usage {
                    n_input_tokens: input,
                    n_cache_tokens: reported.n_cache_tokens,
                    n_cache_write_tokens: reported.n_cache_write_tokens,
                    n_output_tokens: reported.n_output_tokens.max(hold.usage.n_output_tokens),
                },
                true,
            )
        }
    }
}

/// A call refused because a budget is spent: the trial's or the job's, named in the message,
/// which is also remembered in the usage summaries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BudgetExhausted(pub String);

impl TrialState {
    /// Admits a call holding `hold`, or says which budget refuses it (remembered in the
    /// trial's, and for the job's budget the job's, usage so the summaries can say why).
    pub(crate) fn reserve(&self, hold: &Hold) -> Result<(), BudgetExhausted> {
        let job = &self.job;
        let mut job_held = job.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let trial_scope = format!("trial '{}'", self.name);
        let in_flight = |reason: String, held: &Spend| {
            if held.tokens > 0 {
                format!("{reason} (calls in flight included)")
            } else {
                reason
            }
        };
        let trial_spend = add(spend(&usage), *held);
        if let Some(reason) = budget_refusal(&trial_scope, &self.budget, &trial_spend) {
            let reason = in_flight(reason, &held);
            usage.budget_exhausted.get_or_insert_with(|| reason.clone());
            return Err(BudgetExhausted(reason));
        }
        let mut totals = job.totals.lock().unwrap_or_else(|p| p.into_inner());
        let job_spend = add(spend(&totals.totals), *job_held);
        if let Some(reason) = budget_refusal("job", &job.job_budget, &job_spend) {
            let reason = in_flight(reason, &job_held);
            // The job's record says its budget ran out only once spending alone reached it.
            if budget_refusal("job", &job.job_budget, &spend(&totals.totals)).is_some() {
                totals
                    .budget_exhausted
                    .get_or_insert_with(|| reason.clone());
            }
            usage.budget_exhausted.get_or_insert_with(|| reason.clone());
            return Err(BudgetExhausted(reason));
        }
        *held = add(*held, hold.spend);
        *job_held = add(*job_held, hold.spend);
        Ok(())
    }

    /// Releases `hold` (when the call was admitted) and counts the finished call in the
    /// trial's and the job's totals, in one step.
    pub(crate) fn settle(&self, hold: Option<&Hold>, call: SettledCall<'_>) {
        let job = &self.job;
        let mut job_held = job.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hold) = hold {
            *held = sub(*held, hold.spend);
            *job_held = sub(*job_held, hold.spend);
        }
        record_call(&mut usage, call);
        let mut totals = job.totals.lock().unwrap_or_else(|p| p.into_inner());
        record_call(&mut totals.totals, call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_calls_count_their_report_and_cut_ones_their_cap() {
        let hold = Hold::new(400, 1000, None);
        assert_eq!(hold.spend.tokens, 1400);
        let reported = Usage {
            n_input_tokens: 90,
            n_cache_tokens: 10,
            n_cache_write_tokens: 0,
            n_output_tokens: 7,
        };
        assert_eq!(charge(Some(reported), true, &hold), (reported, false));
        let (cut, estimated) = charge(Some(reported), false, &hold);
        assert!(estimated);
        assert_eq!((cut.n_input_tokens, cut.n_output_tokens), (90, 1000));
        let (unknown, _) = charge(None, true, &hold);
        assert_eq!(
            (unknown.n_input_tokens, unknown.n_output_tokens),
            (400, 1000)
        );
    }

    #[test]
    fn holds_are_priced() {
        let price = ModelPrice {
            input_per_mtok: 1.0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            output_per_mtok: 2.0,
            max_output_tokens: None,
        };
        let hold = Hold::new(1_000_000, 1_000_000, Some(&price));
        assert!((hold.spend.cost_usd - 3.0).abs() < 1e-9);
        assert_eq!(
            sub(add(hold.spend, hold.spend), hold.spend).tokens,
            hold.spend.tokens
        );
    }
}
