//! The three wire formats the scripted upstream answers in: OpenAI chat completions, OpenAI
//! responses and Anthropic messages, each streamed (SSE) or not.

use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};

use super::script::{ToolCall, Usage};

/// A request that passed intake, with what to answer.
pub(super) struct Call {
    /// The request body.
    pub request: Value,
    /// The last message's text (where the control words are).
    pub text: String,
    /// The completion text to answer with.
    pub reply: String,
    /// The tool calls to make after the text.
    pub tool_calls: Vec<ToolCall>,
    /// This answer's number on the upstream: tool call ids carry it, so they differ per call.
    pub number: u64,
    /// The usage to report.
    pub usage: Usage,
    /// The model asked for, echoed in the answer.
    pub model: String,
    /// Becomes true when the test releases `HOLD_STREAM` streams.
    pub released: tokio::sync::watch::Receiver<bool>,
}

impl Call {
    fn streamed(&self) -> bool {
        self.request["stream"] == Value::Bool(true)
    }

    /// The id of tool call `i` of this answer, with the provider's prefix (`call`, `toolu`).
    fn tool_id(&self, prefix: &str, i: usize) -> String {
        format!("{prefix}_scripted{}x{i}", self.number)
    }

    /// The answer's message id, unique per call as a provider's is (Claude Code joins the
    /// blocks of answers that share one into one message).
    fn message_id(&self) -> String {
        format!("msg_scripted{}", self.number)
    }
}

impl ToolCall {
    /// The arguments as OpenAI sends them: a JSON string.
    fn arguments_text(&self) -> String {
        self.arguments.to_string()
    }
}

/// `text` in two pieces (at a char boundary near the middle), as streams split arguments.
fn halves(text: &str) -> [&str; 2] {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid += 1;
    }
    let (a, b) = text.split_at(mid);
    [a, b]
}

/// A provider-shaped error.
pub(super) fn error(status: StatusCode, anthropic: bool, message: &str) -> Response {
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
        .body(Body::from(serde_json::to_vec(body).expect("JSON")))
        .expect("response")
}

/// An SSE response from a list of events, with the control words' pacing and failures.
fn sse(events: Vec<String>, call: &Call) -> Response {
    let text = &call.text;
    let slow = text.contains("SLOW_STREAM");
    let broken = text.contains("BREAK_STREAM");
    let hold = text.contains("HOLD_STREAM").then(|| call.released.clone());
    let stream = futures_util::stream::unfold(
        (events.into_iter().enumerate(), slow, broken, hold),
        |(mut iter, slow, broken, mut hold)| async move {
            let (i, event) = iter.next()?;
            if i == 1 && slow {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            if let Some(released) = hold.as_mut().filter(|_| i == 1) {
                let _ = tokio::time::timeout(
                    Duration::from_secs(60),
                    released.wait_for(|released| *released),
                )
                .await;
            }
            if i == 2 && broken {
                // Let the first events reach the wire, so the break is mid-stream, not before it.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Some((
                    Err(std::io::Error::other("scripted break")),
                    (iter, slow, broken, hold),
                ));
            }
            Some((
                Ok::<Bytes, std::io::Error>(Bytes::from(event)),
                (iter, slow, broken, hold),
            ))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .expect("response")
}

fn words(reply: &str) -> Vec<String> {
    reply.split_inclusive(' ').map(str::to_owned).collect()
}

/// `/v1/chat/completions`.
pub(super) fn chat(call: Call) -> Response {
    let u = &call.usage;
    let usage = json!({
        "prompt_tokens": u.input, "completion_tokens": u.output, "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cached},
    });
    let finish = if call.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    if !call.streamed() {
        let mut message = json!({"role": "assistant", "content": call.reply});
        if !call.tool_calls.is_empty() {
            message["tool_calls"] = call
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    json!({"id": call.tool_id("call", i), "type": "function",
                                     "function": {"name": t.name, "arguments": t.arguments_text()}})
                })
                .collect();
        }
        return json_response(
            StatusCode::OK,
            &json!({
                "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1, "model": call.model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
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
    for (i, t) in call.tool_calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": call.tool_id("call", i), "type": "function",
                                   "function": {"name": t.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in halves(&t.arguments_text()) {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    events.push(chunk(json!({}), json!(finish)));
    if call.request["stream_options"]["include_usage"] == Value::Bool(true) {
        events.push(format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": call.model,
                   "choices": [], "usage": usage})
        ));
    }
    events.push("data: [DONE]\n\n".into());
    sse(events, &call)
}

/// `/v1/responses`.
pub(super) fn responses(call: Call) -> Response {
    let u = &call.usage;
    let usage = json!({
        "input_tokens": u.input, "input_tokens_details": {"cached_tokens": u.cached},
        "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input + u.output,
    });
    let message = json!({
        "type": "message", "id": call.message_id(), "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": call.reply, "annotations": []}],
    });
    let function_call = |i: usize, t: &ToolCall, arguments: &str, status: &str| {
        json!({"type": "function_call", "id": call.tool_id("fc", i), "call_id": call.tool_id("call", i),
               "name": t.name, "arguments": arguments, "status": status})
    };
    // The message first (its text may be empty), then one item per tool call.
    let items: Vec<Value> = std::iter::once(message)
        .chain(
            call.tool_calls
                .iter()
                .enumerate()
                .map(|(i, t)| function_call(i, t, &t.arguments_text(), "completed")),
        )
        .collect();
    let response = |status: &str, output_items: Value, usage: Value| {
        json!({
            "id": format!("resp_scripted{}", call.number), "object": "response", "created_at": 1, "status": status, "model": call.model,
            "output": output_items, "usage": usage, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
        })
    };
    if !call.streamed() {
        return json_response(StatusCode::OK, &response("completed", json!(items), usage));
    }
    let mut events: Vec<(&str, Value)> = vec![(
        "response.created",
        json!({"response": response("in_progress", json!([]), Value::Null)}),
    )];
    // The message item as OpenAI streams it: added, its text part, the deltas, then done (an
    // SDK such as Codex's drops text deltas of an item it was not told about).
    let in_progress = json!({
        "type": "message", "id": call.message_id(), "status": "in_progress", "role": "assistant", "content": [],
    });
    let part = |text: &str| json!({"type": "output_text", "text": text, "annotations": []});
    events.push((
        "response.output_item.added",
        json!({"output_index": 0, "item": in_progress}),
    ));
    events.push((
        "response.content_part.added",
        json!({"item_id": call.message_id(), "output_index": 0, "content_index": 0, "part": part("")}),
    ));
    for w in words(&call.reply) {
        events.push((
            "response.output_text.delta",
            json!({"item_id": call.message_id(), "output_index": 0, "content_index": 0, "delta": w, "logprobs": []}),
        ));
    }
    events.push((
        "response.output_text.done",
        json!({"item_id": call.message_id(), "output_index": 0, "content_index": 0, "text": call.reply, "logprobs": []}),
    ));
    events.push((
        "response.content_part.done",
        json!({"item_id": call.message_id(), "output_index": 0, "content_index": 0, "part": part(&call.reply)}),
    ));
    events.push((
        "response.output_item.done",
        json!({"output_index": 0, "item": items[0]}),
    ));
    for (i, t) in call.tool_calls.iter().enumerate() {
        let (index, item_id) = (i + 1, call.tool_id("fc", i));
        let arguments = t.arguments_text();
        events.push((
            "response.output_item.added",
            json!({"output_index": index, "item": function_call(i, t, "", "in_progress")}),
        ));
        for piece in halves(&arguments) {
            events.push((
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": piece}),
            ));
        }
        events.push((
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": index, "arguments": arguments}),
        ));
        events.push((
            "response.output_item.done",
            json!({"output_index": index, "item": items[index]}),
        ));
    }
    events.push((
        "response.completed",
        json!({"response": response("completed", json!(items), usage)}),
    ));
    let events = events
        .into_iter()
        .enumerate()
        .map(|(seq, (kind, mut data))| {
            data["type"] = json!(kind);
            data["sequence_number"] = json!(seq);
            format!("event: {kind}\ndata: {data}\n\n")
        })
        .collect();
    sse(events, &call)
}

/// `/v1/messages`.
pub(super) fn messages(call: Call) -> Response {
    let Usage {
        input,
        cached: cache_read,
        cache_write,
        output,
    } = call.usage;
    let fresh = input.saturating_sub(cache_read + cache_write);
    let usage = json!({"input_tokens": fresh, "cache_read_input_tokens": cache_read,
                       "cache_creation_input_tokens": cache_write, "output_tokens": output});
    let stop = if call.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    // The text block first (index 0), then one tool_use block per call.
    let tool_use = |i: usize, t: &ToolCall, input: &Value| json!({"type": "tool_use", "id": call.tool_id("toolu", i), "name": t.name, "input": input});
    if !call.streamed() {
        let content: Vec<Value> = std::iter::once(json!({"type": "text", "text": call.reply}))
            .chain(
                call.tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, t)| tool_use(i, t, &t.arguments)),
            )
            .collect();
        return json_response(
            StatusCode::OK,
            &json!({
                "id": call.message_id(), "type": "message", "role": "assistant", "model": call.model,
                "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": usage,
            }),
        );
    }
    let event = |kind: &str, data: Value| {
        let mut data = data;
        data["type"] = json!(kind);
        format!("event: {kind}\ndata: {data}\n\n")
    };
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let mut events = vec![event(
        "message_start",
        json!({"message": {"id": call.message_id(), "type": "message", "role": "assistant", "model": call.model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}}),
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
    for (i, t) in call.tool_calls.iter().enumerate() {
        let index = i + 1;
        events.push(event(
            "content_block_start",
            json!({"index": index, "content_block": tool_use(i, t, &json!({}))}),
        ));
        for piece in halves(&t.arguments_text()) {
            events.push(event(
                "content_block_delta",
                json!({"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push(event("content_block_stop", json!({"index": index})));
    }
    events.push(event(
        "message_delta",
        json!({"delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}}),
    ));
    events.push(event("message_stop", json!({})));
    sse(events, &call)
}
