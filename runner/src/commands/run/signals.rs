//! Ctrl-C, SIGTERM and SIGHUP during `runner run`.

use docker_backend::{DockerClient, remove_job_containers};
use tokio_util::sync::CancellationToken;

use crate::exit::ExitCode;
use crate::report::Notice;

/// First Ctrl-C, SIGTERM or SIGHUP (a closed terminal): cancel, let trials tear down, and
/// keep a notice on screen saying so. Second: remove this job's containers and exit at once.
pub fn spawn_signal_handler(
    client: DockerClient,
    job_id: String,
    cancel: CancellationToken,
    notice: Notice,
) {
    tokio::spawn(async move {
        wait_for_signal().await;
        notice.show(
            "warning: interrupted: removing containers and writing records; press Ctrl-C again to exit at once",
        );
        cancel.cancel();
        wait_for_signal().await;
        let _ = remove_job_containers(&client, &job_id).await;
        std::process::exit(i32::from(ExitCode::Interrupted.code()));
    });
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hangup = signal(SignalKind::hangup()).ok();
    let next = |s: &mut Option<tokio::signal::unix::Signal>| {
        let s = s.take();
        async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = next(&mut term) => {}
        _ = next(&mut hangup) => {}
    }
}
