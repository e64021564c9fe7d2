//! A scripted OpenAI/Anthropic-shaped upstream on 127.0.0.1 for the bridge's tests and the
//! end-to-end tests: canned completions with usage on `/v1/chat/completions`, `/v1/responses`
//! and `/v1/messages`, streamed (SSE) or not, failures on demand, and a [`Script`] of replies
//! (per conversation, recognised by its text, or in arrival order). Replies may make tool calls
//! ([`Reply::tool_call`]): OpenAI `tool_calls`, responses `function_call` items and Anthropic
//! `tool_use` blocks, streamed as the providers stream them.
//!
//! ```no_run
//! use testkit::upstream::{Reply, Script, ScriptedUpstream, OPENAI_KEY, ANTHROPIC_KEY};
//! // From a sync test (its own thread and runtime; stopped when dropped):
//! let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY,
//!     Script::new().when("the task's instruction", vec![Reply::text("```bash\nls\n```"), Reply::text("DONE")]));
//! // point the runner at upstream.openai_base_url() (".../v1") with OPENAI_API_KEY=OPENAI_KEY
//! ```
//!
//! Control words in the request's last message text work with any script:
//! - `FAIL_500`: answer 500 with a provider-shaped error.
//! - `ECHO_KEY`: put the API key it received in the completion text (to test redaction).
//! - `SLOW_STREAM`: wait 500 ms between the first and the second stream event.
//! - `HOLD_STREAM`: after the first stream event, wait until the test calls
//!   [`ScriptedUpstream::release_held_streams`] (at most a minute): a test then knows that
//!   whatever it saw arrived while the upstream was still answering, with no clock involved.
//! - `BREAK_STREAM`: stop a stream in the middle by closing the connection.
//!
//! Requests with a wrong key get 401. Every request is remembered ([`ScriptedUpstream::seen`]).

mod examples;
mod script;
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use serde_json::Value;

pub use examples::{Dialect, examples_script, solutions};
pub use script::{Reply, Script, ToolCall, Usage};

/// The completion text of an unscripted call.
pub const REPLY: &str = "Hello from the scripted upstream.";

/// Default usage of a chat completion (input 21 of which 5 cached, output 7).
pub const CHAT_USAGE: Usage = Usage {
    input: 21,
    cached: 5,
    cache_write: 0,
    output: 7,
};
/// Default usage of a response (input 17, output 4).
pub const RESPONSES_USAGE: Usage = Usage {
    input: 17,
    cached: 0,
    cache_write: 0,
    output: 4,
};
/// Default usage of a message: fresh input 13, cache reads 3, cache writes 2 (18 input in
/// all), output 6.
pub const MESSAGES_USAGE: Usage = Usage {
    input: 18,
    cached: 3,
    cache_write: 2,
    output: 6,
};

/// Fake upstream keys, shaped like real keys so the provider-key scans would catch a leak.
pub const OPENAI_KEY: &str = "sk-proj-scriptedUpstreamKey0123456789abcdefXYZ";
pub const ANTHROPIC_KEY: &str = "sk-ant-api03-scriptedUpstreamKey0123456789abcdef";

/// A request as the upstream saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Clone)]
struct Shared {
    openai_key: String,
    anthropic_key: String,
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Numbers the answers, so tool call ids differ between calls.
    calls: Arc<AtomicU64>,
    /// Becomes true when the test releases the `HOLD_STREAM` streams.
    released: tokio::sync::watch::Receiver<bool>,
}

/// The running upstream; dropping it stops it.
pub struct ScriptedUpstream {
    /// Where it listens (127.0.0.1, an ephemeral port).
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    release: tokio::sync::watch::Sender<bool>,
    stop: Stop,
}

enum Stop {
    Task(tokio::task::JoinHandle<()>),
    Thread(Option<tokio::sync::oneshot::Sender<()>>),
}

impl ScriptedUpstream {
    /// Starts it unscripted on the current tokio runtime, accepting the given keys.
    pub async fn start(openai_key: &str, anthropic_key: &str) -> ScriptedUpstream {
        Self::start_with(openai_key, anthropic_key, Script::new()).await
    }

    /// Starts it with `script` on the current tokio runtime.
    pub async fn start_with(
        openai_key: &str,
        anthropic_key: &str,
        script: Script,
    ) -> ScriptedUpstream {
        let (shared, seen, release) = shared(openai_key, anthropic_key, script);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(accept(listener, router(shared)));
        ScriptedUpstream {
            addr,
            seen,
            release,
            stop: Stop::Task(task),
        }
    }

    /// Starts it with `script` on a thread and runtime of its own: for sync tests (the
    /// end-to-end tests run the `runner` binary as a child process).
    pub fn spawn(openai_key: &str, anthropic_key: &str, script: Script) -> ScriptedUpstream {
        Self::spawn_at("127.0.0.1:0", openai_key, anthropic_key, script).expect("bind 127.0.0.1")
    }

    /// [`ScriptedUpstream::spawn`] listening on `addr` (e.g. `127.0.0.1:4190`), for the
    /// `scripted-upstream` binary; fails when the address is taken.
    pub fn spawn_at(
        addr: &str,
        openai_key: &str,
        anthropic_key: &str,
        script: Script,
    ) -> std::io::Result<ScriptedUpstream> {
        let (shared, seen, release) = shared(openai_key, anthropic_key, script);
        let listener = std::net::TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                tokio::select! {
                    _ = accept(listener, router(shared)) => {}
                    _ = stopped => {}
                }
            });
        });
        Ok(ScriptedUpstream {
            addr,
            seen,
            release,
            stop: Stop::Thread(Some(stop)),
        })
    }

    /// The base URL for an OpenAI SDK or the bridge's OpenAI provider (`http://…/v1`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL for an Anthropic SDK or the bridge's Anthropic provider (`http://…`).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Lets every `HOLD_STREAM` stream, held or still to come, send the rest of its events.
    pub fn release_held_streams(&self) {
        let _ = self.release.send(true);
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }
}

impl Drop for ScriptedUpstream {
    fn drop(&mut self) {
        match &mut self.stop {
            Stop::Task(task) => task.abort(),
            Stop::Thread(stop) => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
            }
        }
    }
}

fn shared(
    openai_key: &str,
    anthropic_key: &str,
    script: Script,
) -> (
    Shared,
    Arc<Mutex<Vec<Seen>>>,
    tokio::sync::watch::Sender<bool>,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (release, released) = tokio::sync::watch::channel(false);
    let shared = Shared {
        openai_key: openai_key.to_owned(),
        anthropic_key: anthropic_key.to_owned(),
        script: Arc::new(script),
        seen: seen.clone(),
        calls: Arc::new(AtomicU64::new(1)),
        released,
    };
    (shared, seen, release)
}

fn router(shared: Shared) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(serve))
        .route("/v1/responses", post(serve))
        .route("/v1/messages", post(serve))
        .with_state(shared)
}

async fn accept(listener: tokio::net::TcpListener, router: Router) {
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
}

/// Every route: intake, then the answer in the route's wire format.
async fn serve(
    State(shared): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let call = match intake(&shared, path, &headers, &body) {
        Ok(call) => call,
        Err(response) => return response,
    };
    match path {
        "/v1/chat/completions" => wire::chat(call),
        "/v1/responses" => wire::responses(call),
        _ => wire::messages(call),
    }
}

/// Checks the key, remembers the request, and decides the answer. (A test helper: the large
/// `Err` is the response itself, returned once per request.)
#[allow(clippy::result_large_err)]
fn intake(
    shared: &Shared,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<wire::Call, Response> {
    let anthropic = path == "/v1/messages";
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    shared.seen.lock().expect("seen lock").push(Seen {
        path: path.to_owned(),
        headers: headers.clone(),
        body: body.clone(),
    });
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let (presented, expected) = if anthropic {
        (header("x-api-key"), &shared.anthropic_key)
    } else {
        let bearer = header("authorization");
        (
            bearer.strip_prefix("Bearer ").unwrap_or(""),
            &shared.openai_key,
        )
    };
    if presented != expected {
        return Err(wire::error(
            StatusCode::UNAUTHORIZED,
            anthropic,
            "invalid x-api-key / bearer key",
        ));
    }
    let text = script::last_text(&body);
    if text.contains("FAIL_500") {
        return Err(wire::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            anthropic,
            "scripted failure",
        ));
    }
    let scripted = shared.script.reply_for(&body);
    if let Some(status) = scripted.fail {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Err(wire::error(status, anthropic, &scripted.text));
    }
    let reply = if text.contains("ECHO_KEY") {
        format!("{} Your key is {presented}.", scripted.text)
    } else {
        scripted.text
    };
    let usage = scripted.usage.unwrap_or(match path {
        "/v1/chat/completions" => CHAT_USAGE,
        "/v1/responses" => RESPONSES_USAGE,
        _ => MESSAGES_USAGE,
    });
    Ok(wire::Call {
        model: body["model"].as_str().unwrap_or("unknown").to_owned(),
        request: body,
        text,
        reply,
        tool_calls: scripted.tool_calls,
        number: shared.calls.fetch_add(1, Ordering::Relaxed),
        usage,
        released: shared.released.clone(),
    })
}
