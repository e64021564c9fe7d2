//! The HTTP and WebSocket server: OpenEnv's routes (`/health`, `/schema`, `/metadata`,
//! `/state`, `/reset`, `/step`) and the session endpoint `/ws`, where each connection is one
//! session holding at most one episode at a time.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use engine::{Backend, BackendError, OutputSink};
use serde_json::{Value, json};
use tasks::Task;
use tokio::sync::{Mutex, OnceCell, Semaphore};

use crate::access::Refusal;
use crate::catalog::{Catalog, unservable};
use crate::config::{MAX_REQUEST_BYTES, ServeConfig};
use crate::episode::{Episode, EpisodeNames};
use crate::error::ServeError;
use crate::protocol::{
    EpisodeState, ErrorCode, Observation, ResetParams, StepRequest, StepResult, WsRequest,
    parse_action, parse_ws_request, ws_error, ws_observation, ws_state,
};
use crate::record::Recorder;
use crate::session::Session;

/// Disk measurements (engine inspects with sizes) the episodes may run at once.
const STORAGE_LOOKS: usize = 2;

/// How long a refused connection may wait for its first message before the refusal is sent.
const CAPACITY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A task's image id (or why it could not be prepared), made once for every session.
type ImageCell = Arc<OnceCell<Result<String, BackendError>>>;

/// The shared state of a running server.
pub struct Server<B: Backend> {
    backend: B,
    catalog: Catalog,
    config: Arc<ServeConfig>,
    slots: Arc<Semaphore>,
    /// Turns of the episodes' disk measurements ([`STORAGE_LOOKS`] at once).
    storage_looks: Arc<Semaphore>,
    images: Mutex<HashMap<String, ImageCell>>,
    episodes: AtomicU64,
    live: AtomicU64,
}

impl<B: Backend> Server<B> {
    /// A server of `catalog`'s tasks over `backend`.
    pub fn new(backend: B, catalog: Catalog, config: ServeConfig) -> Arc<Self> {
        Arc::new(Self {
            backend,
            catalog,
            slots: Arc::new(Semaphore::new(config.max_sessions)),
            storage_looks: Arc::new(Semaphore::new(STORAGE_LOOKS)),
            config: Arc::new(config),
            images: Mutex::new(HashMap::new()),
            episodes: AtomicU64::new(0),
            live: AtomicU64::new(0),
        })
    }

    /// The server's settings.
    pub fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// The backend (for the sweep at shutdown).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The routes.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/health", get(health))
            .route("/schema", get(schema))
            .route("/metadata", get(metadata::<B>))
            .route("/state", get(state))
            .route("/reset", post(reset::<B>))
            .route("/step", post(step))
            .route("/ws", get(ws::<B>))
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            // Every route, the WebSocket upgrade among them, is behind the guard.
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                guard::<B>,
            ))
            .with_state(self.clone())
    }

    /// The image id of `task`, prepared once per task whatever the number of sessions.
    async fn image(&self, task: &Task) -> Result<String, ServeError> {
        let cell = {
            let mut images = self.images.lock().await;
            images.entry(task.name.clone()).or_default().clone()
        };
        cell.get_or_init(|| async {
            let log: OutputSink = Arc::new(|_, _| {});
            self.backend
                .prepare_image(
                    task,
                    &engine::ImageRequest::for_task(task, self.config.force_build),
                    &log,
                )
                .await
                .map(|image| image.id)
        })
        .await
        .clone()
        .map_err(|source| ServeError::Image {
            task: task.name.clone(),
            source,
        })
    }

    /// Starts an episode for `params`.
    async fn start_episode(
        &self,
        params: &ResetParams,
    ) -> Result<(Session<B>, Recorder), ServeError> {
        let task = self.catalog.pick(params.task(), params.seed)?;
        if let Some(reason) = unservable(&task) {
            return Err(ServeError::Unservable(reason));
        }
        let image = self.image(&task).await?;
        let number = self.episodes.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("{}__{}", task.short_name(), random_suffix());
        let dir = self.config.job_dir.join(&name);
        let episode_id = params.episode_id.clone().unwrap_or_else(|| name.clone());
        let recorder = Recorder::open(&dir, &task, &episode_id, number)?;
        let names = EpisodeNames { name, dir };
        let episode = Episode::start(
            &self.backend,
            task,
            &image,
            names,
            self.config.clone(),
            recorder.sink(),
            self.storage_looks.clone(),
        )
        .await?;
        Ok((Session::new(episode, episode_id), recorder))
    }
}

/// Lets a request through only when [`crate::access::Access::check`] does: a foreign `Host`
/// or `Origin` is answered 403, a missing or wrong credential 401 (with the challenge a
/// client answers with Basic auth).
async fn guard<B: Backend>(
    State(server): State<Arc<Server<B>>>,
    request: Request,
    next: Next,
) -> Response {
    match server.config.access.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::warn!("refused a request to {}: {refusal}", request.uri().path());
            let status = match refusal {
                Refusal::Credential => StatusCode::UNAUTHORIZED,
                Refusal::Host(_) | Refusal::Origin(_) => StatusCode::FORBIDDEN,
            };
            let mut response =
                (status, axum::Json(json!({"detail": refusal.to_string()}))).into_response();
            if status == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"runner serve\""),
                );
            }
            response
        }
    }
}

/// Eight random hex digits.
fn random_suffix() -> String {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).unwrap_or_default();
    hex::encode(bytes)
}

async fn health() -> impl IntoResponse {
    axum::Json(json!({"status": "healthy"}))
}

async fn schema() -> impl IntoResponse {
    axum::Json(crate::schema::schema())
}

async fn metadata<B: Backend>(State(server): State<Arc<Server<B>>>) -> impl IntoResponse {
    axum::Json(json!({
        "name": "runner serve",
        "description": format!(
            "Harbor tasks as an OpenEnv environment with the Terminal-Bench wrapper's actions: {} task(s)",
            server.catalog.tasks().len()
        ),
        "readme_content": null,
        "version": env!("CARGO_PKG_VERSION"),
        "author": null,
        "documentation_url": null,
    }))
}

/// HTTP `/state`: like OpenEnv's, the state of a fresh environment (episodes live on `/ws`).
async fn state() -> impl IntoResponse {
    axum::Json(EpisodeState::default())
}

/// HTTP `/reset`: stateless, as OpenEnv's HTTP routes are (a fresh environment per request):
/// the first observation of the chosen task, without a container. Episodes run on `/ws`.
async fn reset<B: Backend>(
    State(server): State<Arc<Server<B>>>,
    body: Option<axum::Json<Value>>,
) -> Response {
    let params: ResetParams = match body.map(|b| b.0) {
        None => ResetParams::default(),
        Some(value) => match serde_json::from_value(value) {
            Ok(params) => params,
            Err(e) => return unprocessable(format!("Invalid reset parameters: {e}")),
        },
    };
    match server.catalog.pick(params.task(), params.seed) {
        Ok(task) => {
            let observation = Observation::new(
                &task.name,
                &task.dir.display().to_string(),
                &task.instruction,
                "reset",
            );
            axum::Json(StepResult {
                observation,
                reward: Some(0.0),
                done: false,
            })
            .into_response()
        }
        Err(e) => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"detail": e.to_string()})),
        )
            .into_response(),
    }
}

/// HTTP `/step`: the action is checked against the schema (422 when it does not match); a
/// stateless request has no episode, so the observation says to use `/ws`.
async fn step(axum::Json(request): axum::Json<StepRequest>) -> Response {
    let action = match parse_action(request.action) {
        Ok(action) => action,
        Err(e) => return unprocessable(e.to_string()),
    };
    let observation = Observation::new("", "", "", &action.action_type).failed(
        "HTTP /step runs on a fresh environment without an episode; drive episodes over the WebSocket session (/ws)",
    );
    axum::Json(StepResult {
        observation,
        reward: None,
        done: false,
    })
    .into_response()
}

fn unprocessable(message: String) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(json!({"detail": message})),
    )
        .into_response()
}

async fn ws<B: Backend>(
    State(server): State<Arc<Server<B>>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade
        .max_message_size(MAX_REQUEST_BYTES)
        .max_frame_size(MAX_REQUEST_BYTES)
        .on_upgrade(move |socket| session(server, socket))
}

async fn send(socket: &mut WebSocket, value: &Value) -> bool {
    socket
        .send(Message::Text(value.to_string().into()))
        .await
        .is_ok()
}

/// One WebSocket session: a slot of `--max-sessions`, at most one episode at a time, closed
/// (container removed) when the client leaves, says `close`, or stays idle too long.
async fn session<B: Backend>(server: Arc<Server<B>>, mut socket: WebSocket) {
    let Ok(_slot) = server.slots.clone().try_acquire_owned() else {
        let message = format!(
            "Server at capacity: {} of {} sessions in use; retry later",
            server.config.max_sessions, server.config.max_sessions
        );
        let mut error = ws_error(ErrorCode::CapacityReached, &message);
        error["data"]["active_sessions"] = json!(server.config.max_sessions);
        error["data"]["max_sessions"] = json!(server.config.max_sessions);
        // The refusal answers the client's first message (a client sends before it reads, and
        // a connection closed under its send would read as a network fault), or comes after
        // a few seconds without one: never a hang.
        let _ = tokio::time::timeout(CAPACITY_WAIT, socket.recv()).await;
        send(&mut socket, &error).await;
        let _ = socket.send(Message::Close(None)).await;
        return;
    };
    server.live.fetch_add(1, Ordering::Relaxed);
    let mut current: Option<(Session<B>, Recorder)> = None;
    let idle = server.config.idle_timeout;
    // Messages that arrived while an action ran (a client that does not wait for replies).
    let mut pending: VecDeque<Message> = VecDeque::new();
    let mut gone = false;
    loop {
        let message = match pending.pop_front() {
            Some(message) => message,
            None if gone => break,
            None => match tokio::time::timeout(idle, socket.recv()).await {
                Err(_) => {
                    let text = format!(
                        "session closed after {} s without a message; its container was removed",
                        idle.as_secs()
                    );
                    end(&mut current, Some(text.clone())).await;
                    send(&mut socket, &ws_error(ErrorCode::SessionError, &text)).await;
                    break;
                }
                Ok(None) | Ok(Some(Err(_))) => break,
                Ok(Some(Ok(message))) => message,
            },
        };
        let text = match message {
            Message::Text(text) => text.to_string(),
            Message::Close(_) => break,
            Message::Binary(_) => {
                let reply = ws_error(ErrorCode::InvalidJson, "Invalid JSON: binary message");
                if !send(&mut socket, &reply).await {
                    break;
                }
                continue;
            }
            _ => continue,
        };
        let request = match parse_ws_request(&text) {
            Err((code, message)) => Err(ws_error(code, &message)),
            Ok(WsRequest::Close) => break,
            Ok(request) => Ok(request),
        };
        let reply = match request {
            Err(reply) => reply,
            Ok(request) => {
                // The socket is read while the action runs: its pings are answered (a client
                // drops a connection whose pongs stop, and an action may take minutes), and
                // what else arrives waits its turn.
                let work = answer(&server, &mut current, request);
                tokio::pin!(work);
                loop {
                    tokio::select! {
                        reply = &mut work => break reply,
                        incoming = socket.recv(), if !gone => match incoming {
                            Some(Ok(message)) => pending.push_back(message),
                            None | Some(Err(_)) => gone = true,
                        },
                    }
                }
            }
        };
        if gone || !send(&mut socket, &reply).await {
            break;
        }
    }
    end(&mut current, Some("the client left before evaluate".into())).await;
    server.live.fetch_sub(1, Ordering::Relaxed);
    let _ = socket.send(Message::Close(None)).await;
}

/// The reply to one request of a session (not `close`, which ends it).
async fn answer<B: Backend>(
    server: &Server<B>,
    current: &mut Option<(Session<B>, Recorder)>,
    request: WsRequest,
) -> Value {
    match request {
        WsRequest::Close => ws_error(ErrorCode::SessionError, "the session is closing"),
        WsRequest::State => ws_state(
            current
                .as_ref()
                .map(|(e, _)| e.state())
                .unwrap_or(&EpisodeState::default()),
        ),
        WsRequest::Reset(params) => {
            end(current, Some("reset before evaluate".into())).await;
            match server.start_episode(&params).await {
                Ok((session, mut recorder)) => {
                    let first = session.first_observation();
                    recorder.observed(None, &first);
                    *current = Some((session, recorder));
                    ws_observation(&first)
                }
                Err(e) => ws_error(ErrorCode::ExecutionError, &e.to_string()),
            }
        }
        WsRequest::Step(data) => match (parse_action(data), current.as_mut()) {
            (Err(e), _) => ws_error(ErrorCode::ValidationError, &e.to_string()),
            (Ok(_), None) => ws_error(
                ErrorCode::ExecutionError,
                "TB2 environment not initialized. Call reset() first.",
            ),
            (Ok(action), Some((session, recorder))) => {
                let (result, ending) = session.step(&action, server.backend()).await;
                recorder.observed(Some(&action), &result);
                if let Some(ending) = ending {
                    recorder.finish(session.state(), &ending);
                }
                ws_observation(&result)
            }
        },
    }
}

/// Ends the session's episode, if one runs: container removed, record finished.
async fn end<B: Backend>(current: &mut Option<(Session<B>, Recorder)>, why: Option<String>) {
    if let Some((mut session, mut recorder)) = current.take()
        && session.episode().is_live()
    {
        session.remove().await;
        let ending = crate::record::Ending {
            error: why,
            ..Default::default()
        };
        recorder.finish(session.state(), &ending);
    }
}
