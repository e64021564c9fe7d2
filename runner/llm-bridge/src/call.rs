//! One model call through the bridge: check (token, agent phase, fields and tools, model,
//! budget hold), forward, and pass the response back while recording and metering it (see
//! `crate::in_flight` for how every ending is recorded and settled).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

use crate::forward::{agent_headers, upstream_headers};
use crate::in_flight::{CallInFlight, ResponseRelay};
use crate::ledger::Hold;
use crate::record::CallOutcome;
use crate::request_policy::{check_request, drop_client_fields, requested_output_tokens};
use crate::trial::TrialState;
use crate::usage::{Endpoint, UsageMeter};
use crate::wire_error::Refusal;

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
    // The token was checked in front of every route (`server::require_trial_token`); the
    // phase is this call's own question.
    if !trial.serving() {
        let message = crate::server::unauthorized_message(&trial);
        return call.refuse(api, Refusal::Unauthenticated, message);
    }
    match trial.call_slots.clone().acquire_owned().await {
        Ok(slot) => call.slot = Some(slot),
        Err(_) => return call.refuse(api, Refusal::Internal, "the call slots are closed".into()),
    }
    let request = match read_body(body, trial.job.caps.max_request_bytes).await {
        Ok(bytes) => bytes,
        Err((refusal, message)) => return call.refuse(api, refusal, message),
    };
    call.record.request_bytes = request.len() as u64;

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
    let object = json.as_object_mut().expect("checked to be an object above");
    call.record.dropped_fields = drop_client_fields(endpoint, object);
    let object = &*object;
    if let Err(refusal) = check_request(endpoint, object, trial.job.allow_network_tools) {
        return call.refuse(api, Refusal::FieldNotAllowed, refusal.to_string());
    }
    let requested_output = requested_output_tokens(endpoint, object);

    let providers = &trial.job.providers;
    let route = match trial.policy.route(endpoint, &model, providers) {
        Ok(route) => route,
        Err(refusal) => return call.refuse(api, Refusal::ModelNotAllowed, refusal.to_string()),
    };
    let provider = &providers[route.provider];
    call.record.provider = Some(provider.name.clone());
    call.record.model_declared = Some(route.declared.clone());
    let Some(key) = &trial.job.keys[route.provider] else {
        let message = format!(
            "the runner has no key for provider '{}' ({})",
            provider.name, provider.key
        );
        return call.refuse(api, Refusal::UpstreamUnreachable, message);
    };
    call.price = trial.job.prices.price_for(&route.declared, &model).copied();
    let model_cap = call.price.and_then(|p| p.max_output_tokens);
    let output_cap = match (requested_output, model_cap) {
        (Some(asked), Some(cap)) => asked.min(cap),
        (Some(asked), None) => asked,
        (None, Some(cap)) => cap,
        (None, None) => trial.job.caps.default_max_output_tokens,
    };
    let hold = Hold::new(call.record.request_bytes, output_cap, call.price.as_ref());
    if let Err(reason) = trial.reserve(&hold) {
        return call.refuse(api, Refusal::BudgetExhausted, reason.to_string());
    }
    call.hold = Some(hold);

    let renamed = route.upstream_model != model;
    if renamed {
        json["model"] = Value::String(route.upstream_model.clone());
    }
    if endpoint == Endpoint::ChatCompletions && stream {
        force_stream_usage(&mut json);
    }
    // What goes upstream is always the checked value written anew, never the agent's bytes:
    // a body with a key twice (`"model"` allowed first, another model last) or any other
    // parser trick cannot mean one thing here and another at the provider.
    let forwarded = match serde_json::to_vec(&json) {
        Ok(bytes) => Bytes::from(bytes),
        Err(error) => {
            let message = format!("cannot write the request anew: {error}");
            return call.refuse(api, Refusal::Internal, message);
        }
    };
    let outgoing = match upstream_headers(&headers, provider.api, &key.0) {
        Ok(outgoing) => outgoing,
        Err(error) => return call.refuse(api, Refusal::Internal, error.to_string()),
    };
    // The agent phase may have ended while the body arrived and the checks ran: the last
    // look before anything leaves the bridge.
    if !trial.serving() {
        let message = crate::server::unauthorized_message(&trial);
        return call.refuse(api, Refusal::Unauthenticated, message);
    }
    // Only calls that pass every check are recorded whole, and only while the trial's
    // record has room: refused ones cost a line at most.
    if !trial.recorder.full() {
        match trial.recorder.body_file(call.record.seq, "request", "json") {
            Ok(mut file) => {
                file.write(&request);
                let summary = file.finish();
                call.record.body_truncated |= summary.truncated;
                call.record.request_body = Some(summary.relative);
            }
            Err(error) => {
                call.record.error = Some(format!("cannot record the request body: {error}"))
            }
        }
    } else {
        call.record.body_truncated = true;
    }
    drop(request);
    let url = provider.api.upstream_url(&provider.base_url, endpoint);
    call.billable = true;
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
            // A connection never made cannot have been billed; a request sent that got no
            // answer may have been.
            call.billable = !error.is_connect();
            let message = trial.job.key_secrets.redact_str(&format!(
                "cannot reach provider '{}' at {url}: {error}",
                provider.name
            ));
            let response = Refusal::UpstreamUnreachable.response(api, &message);
            call.record.status = response.status().as_u16();
            call.record.error = Some(message);
            call.finish(CallOutcome::UpstreamUnreachable);
            return response;
        }
    };
    call.record.upstream_headers_ms = Some(call.elapsed_ms());
    let status = upstream.status();
    call.record.status = status.as_u16();
    call.upstream_status = Some(status.as_u16());
    let streaming = upstream
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let ext = if streaming { "sse" } else { "json" };
    if trial.recorder.full() {
        call.record.body_truncated = true;
    } else {
        match trial.recorder.body_file(call.record.seq, "response", ext) {
            Ok(file) => {
                call.record.response_body =
                    Some(format!("calls/{:06}.response.{ext}", call.record.seq));
                call.response_body = Some(file);
            }
            Err(error) => {
                call.record.error = Some(format!("cannot record the response body: {error}"))
            }
        }
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
            CallOutcome::Ok
        } else {
            CallOutcome::UpstreamError
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
