//! A scripted OpenAI/Anthropic-shaped upstream on 127.0.0.1: canned completions with fixed
//! usage, streamed (SSE) or not, and failures on demand.
//!
//! What it does is decided by words in the request's last message text:
//! - `FAIL_500`: answer 500 with a provider-shaped error.
//! - `ECHO_KEY`: put the API key it received in the completion text (to test redaction).
//! - `SLOW_STREAM`: wait 500 ms between the first and the second stream event.
//! - `BREAK_STREAM`: stop a stream in the middle by closing the connection.
//!
//! Requests with a wrong key get 401. Every request is remembered for the tests to inspect.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use serde_json::{Value, json};

/// The completion text every call answers with.
pub const REPLY: &str = "Hello from the scripted upstream.";

/// Usage the upstream reports for each endpoint (input, cached, cache writes, output).
pub const CHAT_USAGE: (u64, u64, u64, u64) = (21, 5, 0, 7);
pub const RESPONSES_USAGE: (u64, u64, u64, u64) = (17, 0, 0, 4);
/// Anthropic reports fresh input 13, cache reads 3, cache writes 2: 18 input in all.
pub const MESSAGES_USAGE: (u64, u64, u64, u64) = (18, 3, 2, 6);

/// A request as the upstream saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Clone)]
struct Script {
    openai_key: String,
    anthropic_key: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// The running upstream.
pub struct ScriptedUpstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedUpstream {
    /// Starts it on an ephemeral port of 127.0.0.1, accepting the given keys.
    pub async fn start(openai_key: &str, anthropic_key: &str) -> ScriptedUpstream {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Script {
            openai_key: openai_key.to_owned(),
            anthropic_key: anthropic_key.to_owned(),
            seen: seen.clone(),
        };
        let router = Router::new()
            .route("/v1/chat/completions", post(serve))
            .route("/v1/responses", post(serve))
            .route("/v1/messages", post(serve))
            .with_state(script);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        ScriptedUpstream { addr, seen, task }
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for ScriptedUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn last_text(body: &Value) -> String {
    let messages = body.get("messages").or_else(|| body.get("input"));
    match messages {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => items
            .last()
            .map(|m| match &m["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// A request that passed intake, with what the script wants answered.
struct Call {
    /// The request body.
    request: Value,
    /// The last message's text (where the script's words are).
    text: String,
    /// The completion text to answer with.
    reply: String,
    /// The model asked for, echoed in the answer.
    model: String,
}

/// Every route: intake, then the answer in the route's wire format.
async fn serve(
    State(script): State<Script>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let call = match intake(&script, path, &headers, &body, path == "/v1/messages") {
        Ok(call) => call,
        Err(response) => return response,
    };
    match path {
        "/v1/chat/completions" => chat(call),
        "/v1/responses" => responses(call),
        _ => messages(call),
    }
}

/// Checks the key, remembers the request, and says what the script wants. (A test helper:
/// the large `Err` is the response itself, returned once per request.)
#[allow(clippy::result_large_err)]
fn intake(
    script: &Script,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
    anthropic: bool,
) -> Result<Call, Response> {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    script.seen.lock().unwrap().push(Seen {
        path: path.to_owned(),
        headers: headers.clone(),
        body: body.clone(),
    });
    let presented = if anthropic {
        headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    } else {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("")
            .to_owned()
    };
    let expected = if anthropic {
        &script.anthropic_key
    } else {
        &script.openai_key
    };
    if &presented != expected {
        return Err(error(
            StatusCode::UNAUTHORIZED,
            anthropic,
            "invalid x-api-key / bearer key",
        ));
    }
    let text = last_text(&body);
    if text.contains("FAIL_500") {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            anthropic,
            "scripted failure",
        ));
    }
    let reply = if text.contains("ECHO_KEY") {
        format!("{REPLY} Your key is {presented}.")
    } else {
        REPLY.to_owned()
    };
    let model = body["model"].as_str().unwrap_or("unknown").to_owned();
    Ok(Call {
        request: body,
        text,
        reply,
        model,
    })
}

fn error(status: StatusCode, anthropic: bool, message: &str) -> Response {
    let body = if anthropic {
        json!({"type": "error", "error": {"type": "api_error", "message": message}})
    } else {
        json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}})
    };
    json_response(status, &body)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-request-id", "req_scripted")
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

/// An SSE response from a list of events, with the script's pacing and failures.
fn sse(events: Vec<String>, text: &str) -> Response {
    let slow = text.contains("SLOW_STREAM");
    let broken = text.contains("BREAK_STREAM");
    let stream = futures_util::stream::unfold(
        (events.into_iter().enumerate(), slow, broken),
        |(mut iter, slow, broken)| async move {
            let (i, event) = iter.next()?;
            if i == 1 && slow {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            if i == 2 && broken {
                // Let the first events reach the wire, so the break is mid-stream, not before it.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Some((
                    Err(std::io::Error::other("scripted break")),
                    (iter, slow, broken),
                ));
            }
            Some((
                Ok::<Bytes, std::io::Error>(Bytes::from(event)),
                (iter, slow, broken),
            ))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn words(reply: &str) -> Vec<String> {
    reply.split_inclusive(' ').map(str::to_owned).collect()
}

fn chat(call: Call) -> Response {
    let (input, cached, _, output) = CHAT_USAGE;
    let usage = json!({
        "prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output,
        "prompt_tokens_details": {"cached_tokens": cached},
    });
    if call.request["stream"] != Value::Bool(true) {
        return json_response(
            StatusCode::OK,
            &json!({
                "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1, "model": call.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": call.reply}, "finish_reason": "stop"}],
                "usage": usage,
            }),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": call.model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    events.extend(
        words(&call.reply)
            .iter()
            .map(|w| chunk(json!({"content": w}), Value::Null)),
    );
    events.push(chunk(json!({}), json!("stop")));
    if call.request["stream_options"]["include_usage"] == Value::Bool(true) {
        events.push(format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": call.model,
                   "choices": [], "usage": usage})
        ));
    }
    events.push("data: [DONE]\n\n".into());
    sse(events, &call.text)
}

fn responses(call: Call) -> Response {
    let (input, cached, _, output) = RESPONSES_USAGE;
    let usage = json!({
        "input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    });
    let message = json!({
        "type": "message", "id": "msg_scripted", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": call.reply, "annotations": []}],
    });
    let response = |status: &str, output_items: Value, usage: Value| {
        json!({
            "id": "resp_scripted", "object": "response", "created_at": 1, "status": status, "model": call.model,
            "output": output_items, "usage": usage, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
        })
    };
    if call.request["stream"] != Value::Bool(true) {
        return json_response(
            StatusCode::OK,
            &response("completed", json!([message]), usage),
        );
    }
    let event = |kind: &str, seq: usize, data: Value| {
        let mut data = data;
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        format!("event: {kind}\ndata: {data}\n\n")
    };
    let mut events = vec![event(
        "response.created",
        0,
        json!({"response": response("in_progress", json!([]), Value::Null)}),
    )];
    for (i, w) in words(&call.reply).iter().enumerate() {
        events.push(event(
            "response.output_text.delta",
            i + 1,
            json!({"item_id": "msg_scripted", "output_index": 0, "content_index": 0, "delta": w, "logprobs": []}),
        ));
    }
    let n = events.len();
    events.push(event(
        "response.completed",
        n,
        json!({"response": response("completed", json!([message]), usage)}),
    ));
    sse(events, &call.text)
}

fn messages(call: Call) -> Response {
    let (_, cache_read, cache_write, output) = MESSAGES_USAGE;
    let fresh = MESSAGES_USAGE.0 - cache_read - cache_write;
    if call.request["stream"] != Value::Bool(true) {
        return json_response(
            StatusCode::OK,
            &json!({
                "id": "msg_scripted", "type": "message", "role": "assistant", "model": call.model,
                "content": [{"type": "text", "text": call.reply}], "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": fresh, "cache_read_input_tokens": cache_read,
                          "cache_creation_input_tokens": cache_write, "output_tokens": output},
            }),
        );
    }
    let event = |kind: &str, data: Value| {
        let mut data = data;
        data["type"] = json!(kind);
        format!("event: {kind}\ndata: {data}\n\n")
    };
    let mut events = vec![event(
        "message_start",
        json!({"message": {"id": "msg_scripted", "type": "message", "role": "assistant", "model": call.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": fresh, "cache_read_input_tokens": cache_read,
                          "cache_creation_input_tokens": cache_write, "output_tokens": 1}}}),
    )];
    events.push(event(
        "content_block_start",
        json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    events.push(event("ping", json!({})));
    for w in words(&call.reply) {
        events.push(event(
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "text_delta", "text": w}}),
        ));
    }
    events.push(event("content_block_stop", json!({"index": 0})));
    events.push(event(
        "message_delta",
        json!({"delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": output}}),
    ));
    events.push(event("message_stop", json!({})));
    sse(events, &call.text)
}
