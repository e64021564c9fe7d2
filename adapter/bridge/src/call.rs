//! One model call through the bridge: check, forward, pass the response back while recording
//! and metering it, and record how it ended whatever happens (refusal, upstream failure, the
//! agent hanging up, the trial closing, a panic).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use chrono::Utc;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

use crate::forward::{agent_headers, presented_tokens, upstream_headers};
use crate::prices::ModelPrice;
use crate::record::{BodyFile, CallRecord, Outcome};
use crate::redact::Redactor;
use crate::trial::TrialState;
use crate::usage::{Endpoint, UsageMeter};
use crate::wire_error::Refusal;

/// A call from arrival until its record is written. Dropping it unfinished (the response body
/// dropped by hyper, the connection cut at close, a panic) writes the record from `Drop`, so
/// no call goes unrecorded and no metered tokens are lost.
struct CallInFlight {
    trial: Arc<TrialState>,
    record: CallRecord,
    started: Instant,
    response_body: Option<BodyFile>,
    meter: Option<UsageMeter>,
    price: Option<ModelPrice>,
    finished: bool,
    /// Held until the record is written, so the slot covers the whole response.
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl CallInFlight {
    fn begin(trial: Arc<TrialState>, endpoint: Endpoint) -> CallInFlight {
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
                outcome: Outcome::Aborted,
                refusal: None,
                error: None,
                usage: None,
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
            finished: false,
            _slot: None,
        }
    }

    fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    /// Refuses the call: records it and returns the provider-shaped error.
    fn refuse(
        mut self,
        api: crate::config::ApiKind,
        refusal: Refusal,
        message: String,
    ) -> Response {
        let response = refusal.response(api, &message);
        self.record.status = response.status().as_u16();
        self.record.refusal = Some(refusal.name().to_owned());
        self.record.error = Some(message);
        self.finish(if refusal == Refusal::Internal {
            Outcome::BridgeError
        } else {
            Outcome::Refused
        });
        response
    }

    /// Feeds one chunk of the upstream response to the record and the meter.
    fn observe(&mut self, chunk: &[u8]) {
        self.record.response_bytes += chunk.len() as u64;
        if let Some(body) = &mut self.response_body {
            body.write(chunk);
        }
        if let Some(meter) = &mut self.meter {
            meter.feed(chunk);
        }
    }

    /// Writes the record once: usage, cost, totals of the trial and the job, `calls.jsonl`.
    fn finish(&mut self, outcome: Outcome) {
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
        self.record.price_known = self.price.is_some();
        self.record.cost_usd = match (&self.price, &self.record.usage) {
            (Some(price), Some(usage)) => Some(price.cost_usd(usage)),
            _ => None,
        };
        let declared = self.record.model_declared.as_deref();
        let usage = self.record.usage.as_ref();
        self.trial
            .usage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record_call(outcome, declared, usage, self.record.cost_usd);
        self.trial
            .job
            .totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .totals
            .record_call(outcome, declared, usage, self.record.cost_usd);
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
            Outcome::BridgeError
        } else if !self.trial.open.load(Ordering::Acquire) {
            self.record.error = Some("the trial closed while the call was running".into());
            Outcome::Aborted
        } else {
            self.record.error =
                Some("the agent closed the connection before the response ended".into());
            Outcome::ClientDisconnected
        };
        self.finish(outcome);
    }
}

/// Reads the request body, at most `max` bytes.
async fn read_body(body: Body, max: usize) -> Result<Bytes, (Refusal, String)> {
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => Err((
            Refusal::TooLarge,
            format!("the request body is larger than the bridge accepts ({max} bytes)"),
        )),
        Err(error) => Err((
            Refusal::BadRequest,
            format!("cannot read the request body: {error}"),
        )),
    }
}

/// Turns on usage reporting in an OpenAI chat stream (`stream_options.include_usage`), which
/// is off by default: without it a streamed call reports no tokens. Done unconditionally, so
/// an agent cannot stream unmetered by asking for `include_usage: false`; the one extra chunk
/// it then gets (empty `choices`, the `usage`) is part of the documented stream format.
fn force_stream_usage(request: &mut Value) -> bool {
    let Some(object) = request.as_object_mut() else {
        return false;
    };
    let options = object
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Default::default()));
    if !options.is_object() {
        *options = Value::Object(Default::default());
    }
    let options = options.as_object_mut().expect("made an object above");
    let already = options.get("include_usage") == Some(&Value::Bool(true));
    options.insert("include_usage".into(), Value::Bool(true));
    !already
}

/// Handles `POST /v1/chat/completions`, `/v1/responses` and `/v1/messages`.
pub(crate) async fn handle_call(
    trial: Arc<TrialState>,
    endpoint: Endpoint,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let api = endpoint.api();
    let mut call = CallInFlight::begin(trial.clone(), endpoint);
    if !trial.authorized(presented_tokens(&headers)) {
        let message = crate::server::unauthorized_message(&trial);
        return call.refuse(api, Refusal::Unauthenticated, message);
    }
    match trial.call_slots.clone().acquire_owned().await {
        Ok(slot) => call._slot = Some(slot),
        Err(_) => return call.refuse(api, Refusal::Internal, "the call slots are closed".into()),
    }
    let request = match read_body(body, trial.job.caps.max_request_bytes).await {
        Ok(bytes) => bytes,
        Err((refusal, message)) => return call.refuse(api, refusal, message),
    };
    call.record.request_bytes = request.len() as u64;
    match trial.recorder.body_file(call.record.seq, "request", "json") {
        Ok(mut file) => {
            file.write(&request);
            let summary = file.finish();
            call.record.body_truncated |= summary.truncated;
            call.record.request_body = Some(summary.relative);
        }
        Err(error) => call.record.error = Some(format!("cannot record the request body: {error}")),
    }

    let mut json: Value = match serde_json::from_slice(&request) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            return call.refuse(
                api,
                Refusal::BadRequest,
                "the request body must be a JSON object".into(),
            );
        }
        Err(error) => {
            return call.refuse(
                api,
                Refusal::BadRequest,
                format!("the request body is not JSON: {error}"),
            );
        }
    };
    let Some(model) = json.get("model").and_then(Value::as_str).map(str::to_owned) else {
        return call.refuse(
            api,
            Refusal::BadRequest,
            "the request has no \"model\" string".into(),
        );
    };
    let stream = json.get("stream") == Some(&Value::Bool(true));
    call.record.model_requested = Some(model.clone());
    call.record.stream = stream;

    let providers = &trial.job.providers;
    let route = match trial.policy.route(endpoint, &model, providers) {
        Ok(route) => route,
        Err(refusal) => return call.refuse(api, Refusal::ModelNotAllowed, refusal.to_string()),
    };
    let provider = &providers[route.provider];
    call.record.provider = Some(provider.name.clone());
    call.record.model_declared = Some(route.declared.clone());
    if let Some(reason) = trial.budget_refusal() {
        return call.refuse(api, Refusal::BudgetExhausted, reason);
    }
    let Some(key) = &trial.job.keys[route.provider] else {
        let message = format!(
            "the runner has no key for provider '{}' ({})",
            provider.name, provider.key
        );
        return call.refuse(api, Refusal::UpstreamUnreachable, message);
    };
    call.price = trial.job.prices.price_for(&route.declared, &model).copied();

    let renamed = route.upstream_model != model;
    if renamed {
        json["model"] = Value::String(route.upstream_model.clone());
    }
    let usage_forced =
        endpoint == Endpoint::ChatCompletions && stream && force_stream_usage(&mut json);
    let forwarded = if renamed || usage_forced {
        Bytes::from(serde_json::to_vec(&json).unwrap_or_else(|_| request.to_vec()))
    } else {
        request
    };
    let outgoing = match upstream_headers(&headers, provider.api, &key.0) {
        Ok(outgoing) => outgoing,
        Err(message) => return call.refuse(api, Refusal::Internal, message),
    };
    let url = provider.api.upstream_url(&provider.base_url, endpoint);
    let sent = trial
        .job
        .client
        .post(&url)
        .headers(outgoing)
        .body(forwarded)
        .send()
        .await;
    let upstream = match sent {
        Ok(response) => response,
        Err(error) => {
            let message = trial.job.key_secrets.redact_str(&format!(
                "cannot reach provider '{}' at {url}: {error}",
                provider.name
            ));
            let response = Refusal::UpstreamUnreachable.response(api, &message);
            call.record.status = response.status().as_u16();
            call.record.error = Some(message);
            call.finish(Outcome::UpstreamUnreachable);
            return response;
        }
    };
    call.record.upstream_headers_ms = Some(call.elapsed_ms());
    let status = upstream.status();
    call.record.status = status.as_u16();
    let streaming = upstream
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let ext = if streaming { "sse" } else { "json" };
    match trial.recorder.body_file(call.record.seq, "response", ext) {
        Ok(file) => {
            call.record.response_body =
                Some(format!("calls/{:06}.response.{ext}", call.record.seq));
            call.response_body = Some(file);
        }
        Err(error) => call.record.error = Some(format!("cannot record the response body: {error}")),
    }
    if status.is_success() {
        call.meter = Some(UsageMeter::new(
            endpoint,
            streaming,
            trial.job.caps.max_usage_json_bytes,
        ));
    }

    let mut headers = agent_headers(upstream.headers());
    if let Ok(value) = HeaderValue::from_str(&call.record.seq.to_string()) {
        headers.insert("x-runner-bridge-call", value);
    }
    let relay = ResponseRelay {
        upstream,
        outcome: if status.is_success() {
            Outcome::Ok
        } else {
            Outcome::UpstreamError
        },
        to_agent: trial.job.key_secrets.stream(),
        call,
        done: false,
    };
    let mut response = Response::new(Body::from_stream(relay.into_stream()));
    *response.status_mut() =
        StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    *response.headers_mut() = headers;
    response
}

/// Moves the upstream body to the agent chunk by chunk (no buffering beyond one chunk and a
/// possible secret prefix), redacting upstream keys on the way, recording and metering it.
struct ResponseRelay {
    upstream: reqwest::Response,
    call: CallInFlight,
    to_agent: Redactor,
    outcome: Outcome,
    done: bool,
}

impl ResponseRelay {
    fn into_stream(
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
                    relay.call.finish(Outcome::UpstreamUnreachable);
                    Some((Err(std::io::Error::other(message)), relay))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_usage_is_forced_on() {
        let mut request = serde_json::json!({"model": "m", "stream": true});
        assert!(force_stream_usage(&mut request));
        assert_eq!(request["stream_options"]["include_usage"], true);
        let mut opted_out =
            serde_json::json!({"model": "m", "stream_options": {"include_usage": false}});
        assert!(force_stream_usage(&mut opted_out));
        assert_eq!(opted_out["stream_options"]["include_usage"], true);
        let mut already = serde_json::json!({"stream_options": {"include_usage": true}});
        assert!(!force_stream_usage(&mut already));
    }
}
