//! `runner serve`: a dataset's tasks as an OpenEnv environment server.
//!
//! Trainers drive environments step by step over OpenEnv's protocol (`openenv-core`'s
//! client: a WebSocket session at `/ws` with `reset`, `step`, `state` and `close` messages,
//! plus HTTP `/health`, `/schema`, `/metadata`, `/state`, `/reset`, `/step`). The actions and
//! observations are the Terminal-Bench wrapper's (`exec`, `write`/`view`/`wait`/`kill` of
//! background processes, `write_file`, `evaluate`, `close`). Each session's episode is a fresh
//! container of its task, started through the engine's [`engine::Backend`] as a trial's is,
//! and `evaluate` kills the policy's processes and runs the task's own verifier
//! ([`verifiers::verify`]).
//!
//! Generic over the backend, like the engine: `runner` wires it to Docker.

pub mod access;
pub mod actions;
pub mod catalog;
pub mod config;
pub mod episode;
pub mod error;
pub mod output;
pub mod paths;
pub mod protocol;
pub mod record;
pub mod schema;
pub mod scripts;
pub mod server;
pub mod session;
pub mod storage_watch;

pub use access::Access;
pub use catalog::Catalog;
pub use config::ServeConfig;
pub use error::ServeError;
pub use server::Server;

use std::sync::Arc;

use engine::Backend;

/// Serves `server` on its address until `shutdown` resolves; then every container of the
/// job is removed.
pub async fn run<B: Backend>(
    server: Arc<Server<B>>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = server.router();
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await;
    match server.backend().remove_job(&server.config().job_id).await {
        Ok(0) => {}
        Ok(n) => tracing::info!("removed {n} container(s) of the served episodes"),
        Err(e) => tracing::warn!("removing the served episodes' containers: {e}"),
    }
    served
}
