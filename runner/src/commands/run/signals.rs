//! Ctrl-C, SIGTERM and SIGHUP during `runner run`.

use std::sync::atomic::{AtomicU8, Ordering};

use docker_backend::{DockerClient, remove_job_containers};
use tokio_util::sync::CancellationToken;

use crate::exit::{ExitCode, Interruption};
use crate::report::Notice;

/// The first signal received (0: none yet), so the exit code names it.
static RECEIVED: AtomicU8 = AtomicU8::new(0);

/// The signal that interrupted this run: the first one received (Ctrl-C when none was, as
/// the engine's own cancellation reads).
pub fn received() -> Interruption {
    match RECEIVED.load(Ordering::SeqCst) {
        2 => Interruption::Terminate,
        3 => Interruption::HangUp,
        _ => Interruption::Interrupt,
    }
}

/// First Ctrl-C, SIGTERM or SIGHUP (a closed terminal): cancel, let trials tear down, and
/// keep a notice on screen saying so. Second: remove this job's containers and exit at once.
/// Either way the exit code is 128 + the first signal's number.
pub fn spawn_signal_handler(
    clients: Vec<DockerClient>,
    job_id: String,
    cancel: CancellationToken,
    notice: Notice,
) {
    tokio::spawn(async move {
        let first = wait_for_signal().await;
        let code = match first {
            Interruption::Interrupt => 1,
            Interruption::Terminate => 2,
            Interruption::HangUp => 3,
        };
        let _ = RECEIVED.compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
        notice.show(
            "warning: interrupted: removing containers and writing records; press Ctrl-C again to exit at once",
        );
        cancel.cancel();
        wait_for_signal().await;
        for client in &clients {
            let _ = remove_job_containers(client, &job_id).await;
        }
        std::process::exit(i32::from(ExitCode::interrupted_by(received()).code()));
    });
}

async fn wait_for_signal() -> Interruption {
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
        _ = tokio::signal::ctrl_c() => Interruption::Interrupt,
        _ = next(&mut term) => Interruption::Terminate,
        _ = next(&mut hangup) => Interruption::HangUp,
    }
}
