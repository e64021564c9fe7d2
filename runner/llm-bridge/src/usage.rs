//! Token usage as the upstream reports it, read from whole JSON responses and from SSE streams.
//!
//! Field conventions follow Harbor's `AgentContext`: `n_input_tokens` counts every input token,
//! cached ones included, and `n_cache_tokens` the cached (read) part of it. Anthropic reports
//! the three input parts apart (fresh, cache reads, cache writes), so they are added up here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::sse::SseEvents;

/// The wire format of a call: which usage fields to read and where they sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// OpenAI `POST /v1/chat/completions`.
    ChatCompletions,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// Anthropic `POST /v1/messages`.
    Messages,
}

impl Endpoint {
    /// The endpoint the bridge serves at `route` (`/v1` and the endpoint's path), if any.
    pub fn of_route(route: &str) -> Option<Endpoint> {
        let path = route.strip_prefix("/v1")?;
        [
            Endpoint::ChatCompletions,
            Endpoint::Responses,
            Endpoint::Messages,
        ]
        .into_iter()
        .find(|endpoint| endpoint.path() == path)
    }

    /// The path below the `/v1` prefix, as appended to a provider's base URL.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/chat/completions",
            Endpoint::Responses => "/responses",
            Endpoint::Messages => "/messages",
        }
    }

    /// The provider API this endpoint belongs to.
    pub fn api(self) -> crate::config::ApiKind {
        match self {
            Endpoint::ChatCompletions | Endpoint::Responses => crate::config::ApiKind::OpenAi,
            Endpoint::Messages => crate::config::ApiKind::Anthropic,
        }
    }
}

/// Tokens of one call (or a sum of calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All input tokens, cache reads and cache writes included.
    pub n_input_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub n_cache_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic reports them; OpenAI does not).
    pub n_cache_write_tokens: u64,
    /// Output tokens, reasoning tokens included.
    pub n_output_tokens: u64,
}

impl Usage {
    /// Input plus output tokens: what a token budget counts.
    pub fn total_tokens(&self) -> u64 {
        self.n_input_tokens + self.n_output_tokens
    }

    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.n_input_tokens += other.n_input_tokens;
        self.n_cache_tokens += other.n_cache_tokens;
        self.n_cache_write_tokens += other.n_cache_write_tokens;
        self.n_output_tokens += other.n_output_tokens;
    }
}

fn count(value: &Value, pointer: &str) -> Option<u64> {
    value.pointer(pointer).and_then(Value::as_u64)
}

/// Usage fields seen so far. Streams report usage in pieces (Anthropic's `message_start` has
/// the input, `message_delta` the final output count), so a later report of a field replaces
/// an earlier one and fields never reported stay unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct UsageParts {
    fresh_input: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    output: Option<u64>,
    /// OpenAI reports total input (cached included); Anthropic reports fresh input only.
    input_includes_cache: bool,
}

impl UsageParts {
    fn overlay(&mut self, endpoint: Endpoint, usage: &Value) {
        if !usage.is_object() {
            return;
        }
        let set = |slot: &mut Option<u64>, found: Option<u64>| {
            if found.is_some() {
                *slot = found;
            }
        };
        match endpoint {
            Endpoint::ChatCompletions => {
                self.input_includes_cache = true;
                set(&mut self.fresh_input, count(usage, "/prompt_tokens"));
                set(
                    &mut self.cache_read,
                    count(usage, "/prompt_tokens_details/cached_tokens"),
                );
                set(&mut self.output, count(usage, "/completion_tokens"));
            }
            Endpoint::Responses => {
                self.input_includes_cache = true;
                set(&mut self.fresh_input, count(usage, "/input_tokens"));
                set(
                    &mut self.cache_read,
                    count(usage, "/input_tokens_details/cached_tokens"),
                );
                set(&mut self.output, count(usage, "/output_tokens"));
            }
            Endpoint::Messages => {
                self.input_includes_cache = false;
                set(&mut self.fresh_input, count(usage, "/input_tokens"));
                set(
                    &mut self.cache_read,
                    count(usage, "/cache_read_input_tokens"),
                );
                set(
                    &mut self.cache_write,
                    count(usage, "/cache_creation_input_tokens"),
                );
                set(&mut self.output, count(usage, "/output_tokens"));
            }
        }
    }

    fn finish(&self) -> Option<Usage> {
        if self.fresh_input.is_none() && self.output.is_none() {
            return None;
        }
        let cache_read = self.cache_read.unwrap_or(0);
        let cache_write = self.cache_write.unwrap_or(0);
        let reported_input = self.fresh_input.unwrap_or(0);
        let n_input_tokens = if self.input_includes_cache {
            reported_input
        } else {
            reported_input + cache_read + cache_write
        };
        Some(Usage {
            n_input_tokens,
            n_cache_tokens: cache_read,
            n_cache_write_tokens: cache_write,
            n_output_tokens: self.output.unwrap_or(0),
        })
    }
}

/// Where the `usage` object sits in a whole (non-streamed) response or in one stream event.
fn usage_object(endpoint: Endpoint, value: &Value) -> Option<&Value> {
    let direct = value.get("usage").filter(|u| u.is_object());
    match endpoint {
        Endpoint::ChatCompletions => direct,
        // Stream events wrap the response: `response.completed` carries `response.usage`.
        Endpoint::Responses => {
            direct.or_else(|| value.pointer("/response/usage").filter(|u| u.is_object()))
        }
        // `message_start` carries `message.usage`, `message_delta` a top-level `usage`.
        Endpoint::Messages => {
            direct.or_else(|| value.pointer("/message/usage").filter(|u| u.is_object()))
        }
    }
}

/// The model name the upstream says answered, from a whole response or a stream event.
fn reported_model(endpoint: Endpoint, value: &Value) -> Option<&str> {
    let pointer = match endpoint {
        Endpoint::ChatCompletions => "/model",
        Endpoint::Responses => {
            if value.pointer("/response/model").is_some() {
                "/response/model"
            } else {
                "/model"
            }
        }
        Endpoint::Messages => {
            if value.pointer("/message/model").is_some() {
                "/message/model"
            } else {
                "/model"
            }
        }
    };
    value.pointer(pointer).and_then(Value::as_str)
}

/// What metering learned from a response body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseFacts {
    /// The usage, when the upstream reported one.
    pub usage: Option<Usage>,
    /// The model the upstream says answered.
    pub model: Option<String>,
}

/// Reads usage from a response body fed in chunks, without holding more than a bounded part
/// of it: an SSE stream is parsed event by event; a whole JSON body is kept up to `max_json`
/// bytes and parsed at the end (a larger one is recorded with its usage unknown).
#[derive(Debug)]
pub struct UsageMeter {
    endpoint: Endpoint,
    parts: UsageParts,
    model: Option<String>,
    mode: MeterMode,
    /// The stream's last event has been read (`response.completed`, `message_stop`,
    /// `[DONE]`): the provider finished the answer, whatever the agent does next.
    ended: bool,
}

#[derive(Debug)]
enum MeterMode {
    Sse(SseEvents),
    Json {
        buffer: Vec<u8>,
        max: usize,
        overflowed: bool,
    },
}

impl UsageMeter {
    /// A meter for a response of `endpoint`; `streaming` when its content type is
    /// `text/event-stream`.
    pub fn new(endpoint: Endpoint, streaming: bool, max_json: usize) -> UsageMeter {
        let mode = if streaming {
            MeterMode::Sse(SseEvents::new(max_json))
        } else {
            MeterMode::Json {
                buffer: Vec::new(),
                max: max_json,
                overflowed: false,
            }
        };
        UsageMeter {
            endpoint,
            parts: UsageParts::default(),
            model: None,
            mode,
            ended: false,
        }
    }

    /// Whether a streamed answer's last event has been read (see the field).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Feeds the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        match &mut self.mode {
            MeterMode::Sse(events) => {
                let endpoint = self.endpoint;
                let parts = &mut self.parts;
                let model = &mut self.model;
                let ended = &mut self.ended;
                events.feed(chunk, |data| {
                    *ended |= is_last_event(endpoint, data);
                    observe_event(endpoint, data, parts, model)
                });
            }
            MeterMode::Json {
                buffer,
                max,
                overflowed,
            } => {
                if buffer.len() + chunk.len() > *max {
                    *overflowed = true;
                    buffer.clear();
                } else if !*overflowed {
                    buffer.extend_from_slice(chunk);
                }
            }
        }
    }

    /// The usage and model once the body has ended.
    pub fn finish(mut self) -> ResponseFacts {
        match &mut self.mode {
            MeterMode::Sse(events) => {
                let endpoint = self.endpoint;
                let parts = &mut self.parts;
                let model = &mut self.model;
                events.finish(|data| observe_event(endpoint, data, parts, model));
            }
            MeterMode::Json {
                buffer, overflowed, ..
            } => {
                if !*overflowed && let Ok(value) = serde_json::from_slice::<Value>(buffer) {
                    if let Some(usage) = usage_object(self.endpoint, &value) {
                        self.parts.overlay(self.endpoint, usage);
                    }
                    self.model = reported_model(self.endpoint, &value).map(str::to_owned);
                }
            }
        }
        ResponseFacts {
            usage: self.parts.finish(),
            model: self.model,
        }
    }
}

/// Whether `data` is the last event of a streamed answer of `endpoint`.
fn is_last_event(endpoint: Endpoint, data: &[u8]) -> bool {
    if data.trim_ascii() == b"[DONE]" {
        return true;
    }
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return false;
    };
    let kind = value.get("type").and_then(Value::as_str);
    match endpoint {
        Endpoint::Responses => kind == Some("response.completed"),
        Endpoint::Messages => kind == Some("message_stop"),
        Endpoint::ChatCompletions => false,
    }
}

fn observe_event(
    endpoint: Endpoint,
    data: &[u8],
    parts: &mut UsageParts,
    model: &mut Option<String>,
) {
    // `[DONE]` and keep-alive comments are not JSON; skipping them is correct.
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Some(usage) = usage_object(endpoint, &value) {
        parts.overlay(endpoint, usage);
    }
    if model.is_none()
        && let Some(name) = reported_model(endpoint, &value)
    {
        *model = Some(name.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter_all(endpoint: Endpoint, streaming: bool, body: &str, chunk: usize) -> ResponseFacts {
        let mut meter = UsageMeter::new(endpoint, streaming, 1 << 20);
        for piece in body.as_bytes().chunks(chunk) {
            meter.feed(piece);
        }
        meter.finish()
    }

    #[test]
    fn the_last_event_of_each_stream_is_recognised() {
        let ends = |endpoint, body: &str| {
            let mut meter = UsageMeter::new(endpoint, true, 1 << 20);
            meter.feed(body.as_bytes());
            meter.ended()
        };
        let responses = "data: {\"type\":\"response.created\"}\n\n";
        assert!(!ends(Endpoint::Responses, responses));
        assert!(ends(
            Endpoint::Responses,
            &format!("{responses}data: {{\"type\":\"response.completed\",\"response\":{{}}}}\n\n")
        ));
        assert!(!ends(
            Endpoint::Messages,
            "data: {\"type\":\"message_delta\"}\n\n"
        ));
        assert!(ends(
            Endpoint::Messages,
            "data: {\"type\":\"message_stop\"}\n\n"
        ));
        assert!(ends(
            Endpoint::ChatCompletions,
            "data: {}\n\ndata: [DONE]\n\n"
        ));
        assert!(!ends(
            Endpoint::ChatCompletions,
            "data: {\"choices\":[]}\n\n"
        ));
    }

    #[test]
    fn openai_chat_whole_and_streamed() {
        let whole = r#"{"id":"c","model":"gpt-x-2025","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":100}}}"#;
        let facts = meter_all(Endpoint::ChatCompletions, false, whole, 5);
        assert_eq!(
            facts.usage,
            Some(Usage {
                n_input_tokens: 120,
                n_cache_tokens: 100,
                n_cache_write_tokens: 0,
                n_output_tokens: 7
            })
        );
        assert_eq!(facts.model.as_deref(), Some("gpt-x-2025"));

        let stream = concat!(
            "data: {\"model\":\"gpt-x\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n",
            "data: {\"model\":\"gpt-x\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":3}}\n\n",
            "data: [DONE]\n\n"
        );
        for chunk in [1, 7, 1000] {
            let facts = meter_all(Endpoint::ChatCompletions, true, stream, chunk);
            assert_eq!(
                facts.usage.map(|u| (u.n_input_tokens, u.n_output_tokens)),
                Some((11, 3))
            );
        }
    }

    #[test]
    fn responses_stream_reads_the_completed_event() {
        let stream = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-r\",\"usage\":null}}\n\n",
            "event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-r\",",
            "\"usage\":{\"input_tokens\":50,\"input_tokens_details\":{\"cached_tokens\":20},\"output_tokens\":9}}}\r\n\r\n"
        );
        let facts = meter_all(Endpoint::Responses, true, stream, 3);
        assert_eq!(
            facts.usage,
            Some(Usage {
                n_input_tokens: 50,
                n_cache_tokens: 20,
                n_cache_write_tokens: 0,
                n_output_tokens: 9
            })
        );
        assert_eq!(facts.model.as_deref(), Some("gpt-r"));
    }

    #[test]
    fn anthropic_stream_adds_cache_parts_and_takes_the_final_output_count() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",",
            "\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":30,\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\n\n",
            "event: ping\ndata: {\"type\":\"ping\"}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
        let facts = meter_all(Endpoint::Messages, true, stream, 4);
        assert_eq!(
            facts.usage,
            Some(Usage {
                n_input_tokens: 45,
                n_cache_tokens: 30,
                n_cache_write_tokens: 5,
                n_output_tokens: 42
            })
        );
        assert_eq!(facts.model.as_deref(), Some("claude-x"));
    }

    #[test]
    fn missing_or_oversized_usage_is_unknown_not_zero() {
        let facts = meter_all(Endpoint::ChatCompletions, false, r#"{"choices":[]}"#, 4);
        assert_eq!(facts.usage, None);
        let mut meter = UsageMeter::new(Endpoint::ChatCompletions, false, 16);
        meter.feed(br#"{"usage":{"prompt_tokens":1,"completion_tokens":1}}"#);
        assert_eq!(meter.finish().usage, None);
        let facts = meter_all(Endpoint::Messages, true, "data: [DONE]\n\n", 2);
        assert_eq!(facts.usage, None);
    }
}
