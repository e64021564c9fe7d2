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

use crate::bridge::ProviderKey;
use crate::config::ProviderConfig;
use crate::forward::{agent_headers, upstream_headers};
use crate::in_flight::{CallInFlight, ResponseRelay};
use crate::ledger::Hold;
use crate::policy::Route;
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

/// Why a call is refused before it goes upstream: the refusal and its message.
type Refused = (Refusal, String);

/// A request that passed every check, ready to go upstream.
struct Admitted<'t> {
    /// The agent's bytes, kept for the record only.
    request: Bytes,
    /// The checked request written anew: what goes upstream.
    forwarded: Bytes,
    /// The agent's headers, filtered, with the provider's real key.
    outgoing: HeaderMap,
    provider: &'t ProviderConfig,
}

/// What the request says, once read as a JSON object.
struct Parsed {
    json: Value,
    model: String,
    stream: bool,
    requested_output: Option<u64>,
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
    let admitted = match admit(&trial, &mut call, endpoint, &headers, body).await {
        Ok(admitted) => admitted,
        Err((refusal, message)) => return call.refuse(api, refusal, message),
    };
    record_request(&trial, &mut call, admitted.request);
    let url = admitted
        .provider
        .api
        .upstream_url(&admitted.provider.base_url, endpoint);
    call.billable = true;
    let sent = trial
        .job
        .client
        .post(&url)
        .headers(admitted.outgoing)
        .body(admitted.forwarded)
        .send()
        .await;
    match sent {
        Ok(upstream) => relay_response(&trial, call, endpoint, upstream),
        Err(error) => unreachable_upstream(&trial, call, endpoint, admitted.provider, &url, error),
    }
}

/// Every check before anything leaves the bridge, in order: the agent phase, a call slot,
/// the body, its fields and tools, the model's route and key, the budget hold, the request
/// written anew, and the agent phase once more.
async fn admit<'t>(
    trial: &'t TrialState,
    call: &mut CallInFlight,
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: Body,
) -> Result<Admitted<'t>, Refused> {
    // The token was checked in front of every route (`server::require_trial_token`); the
    // phase is this call's own question.
    check_serving(trial)?;
    match trial.call_slots.clone().acquire_owned().await {
        Ok(slot) => call.slot = Some(slot),
        Err(_) => return Err((Refusal::Internal, "the call slots are closed".into())),
    }
    let request = read_body(body, trial.job.caps.max_request_bytes).await?;
    call.record.request_bytes = request.len() as u64;
    let mut parsed = parse_request(call, endpoint, &request, trial.job.allow_network_tools)?;
    let (route, provider, key) = route_model(trial, call, endpoint, &parsed.model)?;
    reserve_budget(trial, call, &route, &parsed)?;
    let forwarded = rewrite_request(&mut parsed, &route, endpoint)?;
    let outgoing = upstream_headers(headers, provider.api, &key.0)
        .map_err(|error| (Refusal::Internal, error.to_string()))?;
    // The agent phase may have ended while the body arrived and the checks ran: the last
    // look before anything leaves the bridge.
    check_serving(trial)?;
    Ok(Admitted {
        request,
        forwarded,
        outgoing,
        provider,
    })
}

/// Refuses a call made outside the trial's agent phase.
fn check_serving(trial: &TrialState) -> Result<(), Refused> {
    if trial.serving() {
        Ok(())
    } else {
        Err((
            Refusal::Unauthenticated,
            crate::server::unauthorized_message(trial),
        ))
    }
}

/// Reads the body as a JSON object with a `"model"` string, drops the fields the bridge
/// removes and checks the rest (fields and tools).
fn parse_request(
    call: &mut CallInFlight,
    endpoint: Endpoint,
    request: &[u8],
    allow_network_tools: bool,
) -> Result<Parsed, Refused> {
    let mut json: Value = match serde_json::from_slice(request) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            return Err((
                Refusal::BadRequest,
                "the request body must be a JSON object".into(),
            ));
        }
        Err(error) => {
            return Err((
                Refusal::BadRequest,
                format!("the request body is not JSON: {error}"),
            ));
        }
    };
    let Some(model) = json.get("model").and_then(Value::as_str).map(str::to_owned) else {
        return Err((
            Refusal::BadRequest,
            "the request has no \"model\" string".into(),
        ));
    };
    let stream = json.get("stream") == Some(&Value::Bool(true));
    call.record.model_requested = Some(model.clone());
    call.record.stream = stream;
    let object = json.as_object_mut().expect("checked to be an object above");
    call.record.dropped_fields = drop_client_fields(endpoint, object);
    let object = &*object;
    if let Err(refusal) = check_request(endpoint, object, allow_network_tools) {
        return Err((Refusal::FieldNotAllowed, refusal.to_string()));
    }
    let requested_output = requested_output_tokens(endpoint, object);
    Ok(Parsed {
        json,
        model,
        stream,
        requested_output,
    })
}

/// The declared model the request may use, its provider and the runner's key for it.
fn route_model<'t>(
    trial: &'t TrialState,
    call: &mut CallInFlight,
    endpoint: Endpoint,
    model: &str,
) -> Result<(Route, &'t ProviderConfig, &'t ProviderKey), Refused> {
    let providers = &trial.job.providers;
    let route = trial
        .policy
        .route(endpoint, model, providers)
        .map_err(|refusal| (Refusal::ModelNotAllowed, refusal.to_string()))?;
    let provider = &providers[route.provider];
    call.record.provider = Some(provider.name.clone());
    call.record.model_declared = Some(route.declared.clone());
    let Some(key) = &trial.job.keys[route.provider] else {
        let message = format!(
            "the runner has no key for provider '{}' ({})",
            provider.name, provider.key
        );
        return Err((Refusal::UpstreamUnreachable, message));
    };
    Ok((route, provider, key))
}

/// Holds what the call may cost of the budgets: its request bytes and the output it may
/// ask for (the smaller of the request's and the model's cap, else the bridge's default).
fn reserve_budget(
    trial: &TrialState,
    call: &mut CallInFlight,
    route: &Route,
    parsed: &Parsed,
) -> Result<(), Refused> {
    call.price = trial
        .job
        .prices
        .price_for(&route.declared, &parsed.model)
        .copied();
    let model_cap = call.price.and_then(|p| p.max_output_tokens);
    let output_cap = match (parsed.requested_output, model_cap) {
        (Some(asked), Some(cap)) => asked.min(cap),
        (Some(asked), None) => asked,
        (None, Some(cap)) => cap,
        (None, None) => trial.job.caps.default_max_output_tokens,
    };
    let hold = Hold::new(call.record.request_bytes, output_cap, call.price.as_ref());
    if let Err(reason) = trial.reserve(&hold) {
        return Err((Refusal::BudgetExhausted, reason.to_string()));
    }
    call.hold = Some(hold);
    Ok(())
}

/// The request as it goes upstream: the provider's model name, usage forced on in a chat
/// stream, written anew.
fn rewrite_request(
    parsed: &mut Parsed,
    route: &Route,
    endpoint: Endpoint,
) -> Result<Bytes, Refused> {
    let json = &mut parsed.json;
    let renamed = route.upstream_model != parsed.model;
    if renamed {
        json["model"] = Value::String(route.upstream_model.clone());
    }
    if endpoint == Endpoint::ChatCompletions && parsed.stream {
        force_stream_usage(json);
    }
    // What goes upstream is always the checked value written anew, never the agent's bytes:
    // a body with a key twice (`"model"` allowed first, another model last) or any other
    // parser trick cannot mean one thing here and another at the provider.
    match serde_json::to_vec(json) {
        Ok(bytes) => Ok(Bytes::from(bytes)),
        Err(error) => Err((
            Refusal::Internal,
            format!("cannot write the request anew: {error}"),
        )),
    }
}

/// Records the request body of an admitted call, while the trial's record has room.
fn record_request(trial: &TrialState, call: &mut CallInFlight, request: Bytes) {
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
}

/// Ends a call whose request got no answer from the provider.
fn unreachable_upstream(
    trial: &TrialState,
    mut call: CallInFlight,
    endpoint: Endpoint,
    provider: &ProviderConfig,
    url: &str,
    error: reqwest::Error,
) -> Response {
    // A connection never made cannot have been billed; a request sent that got no answer
    // may have been.
    call.billable = !error.is_connect();
    let message = trial.job.key_secrets.redact_str(&format!(
        "cannot reach provider '{}' at {url}: {error}",
        provider.name
    ));
    let response = Refusal::UpstreamUnreachable.response(endpoint.api(), &message);
    call.record.status = response.status().as_u16();
    call.record.error = Some(message);
    call.finish(CallOutcome::UpstreamUnreachable);
    response
}

/// Passes the provider's answer back to the agent, recording and metering its body as it
/// streams through (see [`ResponseRelay`]).
fn relay_response(
    trial: &TrialState,
    mut call: CallInFlight,
    endpoint: Endpoint,
    upstream: reqwest::Response,
) -> Response {
    call.record.upstream_headers_ms = Some(call.elapsed_ms());
    let status = upstream.status();
    call.record.status = status.as_u16();
    call.upstream_status = Some(status.as_u16());
    let streaming = upstream
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    open_response_record(trial, &mut call, if streaming { "sse" } else { "json" });
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

/// Opens the file the response body is recorded into, while the trial's record has room.
fn open_response_record(trial: &TrialState, call: &mut CallInFlight, ext: &str) {
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
