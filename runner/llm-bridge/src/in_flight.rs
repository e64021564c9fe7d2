//! A call from arrival until its record is written, and the relay of its response body: the
//! record, the metering and the budget's settlement happen exactly once, however the call
//! ends (refusal, upstream failure, the agent hanging up, the trial closing, a panic).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use chrono::Utc;

use crate::ledger::{Hold, charge};
use crate::prices::ModelPrice;
use crate::record::{BodyFile, CallOutcome, CallRecord};
use crate::redact::Redactor;
use crate::summary::SettledCall;
use crate::trial::TrialState;
use crate::usage::{Endpoint, UsageMeter};
use crate::wire_error::Refusal;

/// A call in progress. Dropping it unfinished (the response body dropped by hyper, the
/// connection cut at close, a panic) writes the record from `Drop`, so no call goes
/// unrecorded, no metered tokens are lost and no budget hold is left behind.
pub(crate) struct CallInFlight {
    pub trial: Arc<TrialState>,
    pub record: CallRecord,
    started: Instant,
    pub response_body: Option<BodyFile>,
    pub meter: Option<UsageMeter>,
    pub price: Option<ModelPrice>,
    /// What the call holds of the budgets, once admitted.
    pub hold: Option<Hold>,
    /// True once the request went out and the provider may bill it (false again when the
    /// connection was never made).
    pub billable: bool,
    /// The status the upstream answered with, once it answered.
    pub upstream_status: Option<u16>,
    finished: bool,
    /// Held until the record is written, so the slot covers the whole response.
    pub slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl CallInFlight {
    pub fn begin(trial: Arc<TrialState>, endpoint: Endpoint) -> CallInFlight {
        let seq = trial.next_call.fetch_add(1, Ordering::Relaxed);
        CallInFlight {
            trial,
            record: CallRecord {
                seq,
                started_at: Utc::now(),
                duration_ms: 0.0,
                upstream_headers_ms: None,
                path: format!("/v1{}", endpoint.path()),
                endpoint: Some(endpoint),
                stream: false,
                model_requested: None,
                model_declared: None,
                model_reported: None,
                provider: None,
                status: 0,
                outcome: CallOutcome::Aborted,
                refusal: None,
                dropped_fields: Vec::new(),
                error: None,
                usage: None,
                charged: None,
                cost_usd: None,
                price_known: false,
                request_body: None,
                request_bytes: 0,
                response_body: None,
                response_bytes: 0,
                body_truncated: false,
            },
            started: Instant::now(),
            response_body: None,
            meter: None,
            price: None,
            hold: None,
            billable: false,
            upstream_status: None,
            finished: false,
            slot: None,
        }
    }

    pub fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    /// Refuses the call: records it and returns the provider-shaped error.
    pub fn refuse(
        mut self,
        api: crate::config::ApiKind,
        refusal: Refusal,
        message: String,
    ) -> axum::response::Response {
        let response = refusal.response(api, &message);
        self.record.status = response.status().as_u16();
        self.record.refusal = Some(refusal.name().to_owned());
        self.record.error = Some(message);
        self.finish(if refusal == Refusal::Internal {
            CallOutcome::BridgeError
        } else {
            CallOutcome::Refused
        });
        response
    }

    /// Feeds one chunk of the upstream response to the record and the meter.
    pub fn observe(&mut self, chunk: &[u8]) {
        self.record.response_bytes += chunk.len() as u64;
        if let Some(body) = &mut self.response_body {
            body.write(chunk);
        }
        if let Some(meter) = &mut self.meter {
            meter.feed(chunk);
        }
    }

    /// What the budgets count for this call and whether it is an estimate: nothing for a call
    /// never admitted or never sent; the report for an upstream error status; for a success
    /// (or a request sent that got no answer) the report when the call ended whole, else the
    /// charge of its hold (see [`charge`]).
    fn accounted(
        &self,
        outcome: CallOutcome,
        reported: Option<crate::Usage>,
    ) -> (Option<crate::Usage>, bool) {
        let Some(hold) = &self.hold else {
            return (reported, false);
        };
        let failed_status = self
            .upstream_status
            .is_some_and(|status| !(200..300).contains(&status));
        if !self.billable || failed_status {
            return (reported, false);
        }
        let (usage, estimated) = charge(reported, outcome == CallOutcome::Ok, hold);
        (Some(usage), estimated)
    }

    /// Writes the record once: usage, cost, the budget's settlement, `calls.jsonl`.
    pub fn finish(&mut self, outcome: CallOutcome) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.record.outcome = outcome;
        self.record.duration_ms = self.elapsed_ms();
        if let Some(body) = self.response_body.take() {
            let summary = body.finish();
            self.record.body_truncated |= summary.truncated;
            if let Some(error) = summary.error {
                self.record
                    .error
                    .get_or_insert(format!("the response body record is incomplete: {error}"));
            }
        }
        if let Some(meter) = self.meter.take() {
            let facts = meter.finish();
            self.record.usage = facts.usage;
            self.record.model_reported = facts.model;
        }
        let (accounted, estimated) = self.accounted(outcome, self.record.usage);
        if estimated {
            self.record.charged = accounted;
        }
        self.record.price_known = self.price.is_some();
        self.record.cost_usd = match (&self.price, &accounted) {
            (Some(price), Some(usage)) => Some(price.cost_usd(usage)),
            _ => None,
        };
        self.trial.settle(
            self.hold.as_ref(),
            SettledCall {
                outcome,
                declared: self.record.model_declared.as_deref(),
                usage: accounted.as_ref(),
                cost_usd: self.record.cost_usd,
                estimated,
            },
        );
        tracing::debug!(
            trial = %self.trial.name,
            seq = self.record.seq,
            path = %self.record.path,
            model = self.record.model_requested.as_deref().unwrap_or("-"),
            status = self.record.status,
            outcome = ?outcome,
            duration_ms = self.record.duration_ms,
            error = self.record.error.as_deref().unwrap_or(""),
            "llm bridge call"
        );
        // A refused call's line is the one thing a flood of refusals could grow without
        // bound: past the record's cap only its count (in usage.json) is kept.
        if outcome == CallOutcome::Refused && self.trial.recorder.full() {
            self.trial
                .usage
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .n_calls_not_recorded += 1;
            return;
        }
        if let Err(error) = self.trial.recorder.append(&self.record) {
            tracing::error!(
                "cannot append call {} of trial '{}' to calls.jsonl: {error}",
                self.record.seq,
                self.trial.name
            );
        }
    }
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let outcome = if std::thread::panicking() {
            self.record.error = Some("the bridge panicked during this call".into());
            CallOutcome::BridgeError
        } else if !self.trial.open.load(Ordering::Acquire) {
            self.record.error = Some("the trial closed while the call was running".into());
            CallOutcome::Aborted
        } else if self.meter.as_ref().is_some_and(|m| m.ended()) {
            // The stream's last event (with its final usage) had been read: the provider
            // answered whole and charges what it reported, even though the agent hung up
            // before the upstream's end of stream (Codex closes right after
            // `response.completed`).
            CallOutcome::Ok
        } else {
            self.record.error =
                Some("the agent closed the connection before the response ended".into());
            CallOutcome::ClientDisconnected
        };
        self.finish(outcome);
    }
}

/// Moves the upstream body to the agent chunk by chunk (no buffering beyond one chunk and a
/// possible secret prefix), redacting upstream keys on the way, recording and metering it.
pub(crate) struct ResponseRelay {
    pub upstream: reqwest::Response,
    pub call: CallInFlight,
    pub to_agent: Redactor,
    pub outcome: CallOutcome,
    pub done: bool,
}

impl ResponseRelay {
    pub fn into_stream(
        self,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
        futures_util::stream::unfold(self, |mut relay| async move {
            if relay.done {
                return None;
            }
            match relay.upstream.chunk().await {
                Ok(Some(chunk)) => {
                    relay.call.observe(&chunk);
                    let passed = Bytes::from(relay.to_agent.push(&chunk));
                    Some((Ok(passed), relay))
                }
                Ok(None) => {
                    relay.done = true;
                    let tail = relay.to_agent.finish();
                    let outcome = relay.outcome;
                    relay.call.finish(outcome);
                    (!tail.is_empty()).then(|| (Ok(Bytes::from(tail)), relay))
                }
                Err(error) => {
                    relay.done = true;
                    let message = relay
                        .call
                        .trial
                        .job
                        .key_secrets
                        .redact_str(&format!("the upstream response broke off: {error}"));
                    relay.call.record.error = Some(message.clone());
                    relay.call.finish(CallOutcome::UpstreamUnreachable);
                    Some((Err(std::io::Error::other(message)), relay))
                }
            }
        })
    }
}
