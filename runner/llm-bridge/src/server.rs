//! A trial's HTTP server on its unix socket: the accept loop, the routes, and the answers the
//! bridge gives itself (`/v1/models`, unknown routes).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use serde_json::json;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::call::handle_call;
use crate::config::ApiKind;
use crate::forward::presented_tokens;
use crate::in_flight::CallInFlight;
use crate::trial::TrialState;
use crate::usage::Endpoint;
use crate::wire_error::Refusal;

/// The routes: the three model endpoints, the model list, and a provider-shaped 404 for
/// anything else (the bridge is not a general proxy).
pub(crate) fn router(state: Arc<TrialState>) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(|State(s), headers, body| {
                handle_call(s, Endpoint::ChatCompletions, headers, body)
            }),
        )
        .route(
            "/v1/responses",
            post(|State(s), headers, body| handle_call(s, Endpoint::Responses, headers, body)),
        )
        .route(
            "/v1/messages",
            post(|State(s), headers, body| handle_call(s, Endpoint::Messages, headers, body)),
        )
        .route(crate::relay::END_TURN_PATH, post(end_turn))
        .route("/v1/models", get(list_models))
        .route("/v1/models/{id}", get(one_model))
        .fallback(not_found)
        // Outermost, so it stands in front of every route, the fallback and any route added
        // later: a request without this trial's token reaches no handler.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_trial_token,
        ))
        .with_state(state)
}

/// The bridge's one token check: the request must present this trial's token (a bearer
/// token or `x-api-key`). Whether the trial serves calls *now* (its agent phase) is the
/// handlers' own question, asked again just before anything leaves the bridge.
async fn require_trial_token(
    State(state): State<Arc<TrialState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if state.presents_token(presented_tokens(request.headers())) {
        return next.run(request).await;
    }
    match Endpoint::of_route(request.uri().path()) {
        // A model call refused here is still one of the trial's refused calls: recorded and
        // counted, in its endpoint's API shape.
        Some(endpoint) => {
            let message = unauthorized_message(&state);
            CallInFlight::begin(state, endpoint).refuse(
                endpoint.api(),
                Refusal::Unauthenticated,
                message,
            )
        }
        None => unauthorized(&state, api_of(request.headers())),
    }
}

/// Serves connections until `shutdown` turns true, then closes idle connections, lets busy
/// ones finish for `grace`, and cuts off the rest. Owning every connection task in a JoinSet
/// is what makes the cut-off certain: dropping them drops their in-flight calls, whose records
/// then say `aborted`.
pub(crate) async fn serve(
    listener: UnixListener,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let service = TowerToHyperService::new(router.clone());
                    let connection = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    let connection = graceful.watch(connection);
                    connections.spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::debug!("llm bridge connection ended: {error}");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!("llm bridge accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(joined) = connections.join_next() => {
                if let Err(error) = joined && error.is_panic() {
                    tracing::error!("llm bridge connection panicked; its call is recorded as bridge_error");
                }
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {}
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// Which error and list shapes to use on routes shared by both APIs: Anthropic's SDKs always
/// send `anthropic-version`.
fn api_of(headers: &HeaderMap) -> ApiKind {
    if headers.contains_key("anthropic-version") {
        ApiKind::Anthropic
    } else {
        ApiKind::OpenAi
    }
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(value).unwrap_or_default()))
        .unwrap_or_default()
}

fn unauthorized(state: &TrialState, api: ApiKind) -> Response {
    Refusal::Unauthenticated.response(api, &unauthorized_message(state))
}

/// The message for a missing, wrong or revoked token.
pub(crate) fn unauthorized_message(state: &TrialState) -> String {
    if !state.open.load(std::sync::atomic::Ordering::Acquire) {
        format!("trial '{}' has ended; its token is revoked", state.name)
    } else if !state.serving.load(std::sync::atomic::Ordering::Acquire) {
        format!(
            "trial '{}' is not in its agent phase; the runner's LLM bridge serves calls only while the agent's command runs",
            state.name
        )
    } else {
        format!(
            "the runner's LLM bridge for trial '{}' needs the per-trial token it gave the agent (OPENAI_API_KEY / ANTHROPIC_API_KEY)",
            state.name
        )
    }
}

fn model_entry(api: ApiKind, id: &str, provider: &str) -> serde_json::Value {
    match api {
        ApiKind::OpenAi => {
            json!({ "id": id, "object": "model", "created": 0, "owned_by": provider })
        }
        ApiKind::Anthropic => json!({
            "type": "model", "id": id, "display_name": id, "created_at": "1970-01-01T00:00:00Z",
        }),
    }
}

/// `GET /v1/models`: the declared models, answered by the bridge itself (the upstream's list
/// would advertise models the trial may not call).
async fn list_models(State(state): State<Arc<TrialState>>, headers: HeaderMap) -> Response {
    let api = api_of(&headers);
    if !state.serving() {
        return unauthorized(&state, api);
    }
    let entries: Vec<serde_json::Value> = state
        .policy
        .listed(api, &state.job.providers)
        .iter()
        .map(|(id, provider)| model_entry(api, id, provider))
        .collect();
    let body = match api {
        ApiKind::OpenAi => json!({ "object": "list", "data": entries }),
        ApiKind::Anthropic => json!({
            "data": entries,
            "has_more": false,
            "first_id": entries.first().map(|e| e["id"].clone()),
            "last_id": entries.last().map(|e| e["id"].clone()),
        }),
    };
    json_response(StatusCode::OK, &body)
}

/// `GET /v1/models/{id}`.
async fn one_model(
    State(state): State<Arc<TrialState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let api = api_of(&headers);
    if !state.serving() {
        return unauthorized(&state, api);
    }
    match state
        .policy
        .listed(api, &state.job.providers)
        .iter()
        .find(|(name, _)| *name == id)
    {
        Some((name, provider)) => json_response(StatusCode::OK, &model_entry(api, name, provider)),
        None => Refusal::NotFound.response(
            api,
            &format!(
                "model '{id}' is not allowed in this trial; allowed models: {}",
                state.policy.declared().join(", ")
            ),
        ),
    }
}

/// `POST /runner/end-turn`: the agent's command has exited (the runner's own shell says so
/// through the relay, see `TrialBridge::end_turn_command`); the trial stops serving calls.
/// Only the trial's token (checked in front of every route) may end its turn, which only takes
/// away its own calls.
async fn end_turn(State(state): State<Arc<TrialState>>) -> Response {
    state
        .serving
        .store(false, std::sync::atomic::Ordering::Release);
    tracing::debug!(trial = %state.name, "llm bridge: the agent's turn ended in-band");
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::empty())
        .unwrap_or_default()
}

async fn not_found(headers: HeaderMap, uri: axum::http::Uri) -> Response {
    Refusal::NotFound.response(
        api_of(&headers),
        &format!(
            "the runner's LLM bridge does not serve {}; it serves POST /v1/chat/completions, POST /v1/responses, POST /v1/messages and GET /v1/models",
            uri.path()
        ),
    )
}
