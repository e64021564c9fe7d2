//! A sidecar's output (stdout and stderr, as `docker logs` shows it) saved to the trial
//! directory, capped so a chatty or hostile service cannot fill the disk. Saving is best
//! effort: a failure is written into the file instead of failing the teardown.

use std::io::Write;
use std::path::Path;

use bollard::query_parameters::LogsOptionsBuilder;
use futures_util::StreamExt;

use crate::connect::DockerClient;

/// The most bytes of one sidecar's log kept.
pub const LOG_CAP_BYTES: usize = 1 << 20;

/// Writes the logs of container `id` to `path` (at most [`LOG_CAP_BYTES`], then a marker).
pub async fn save(client: &DockerClient, id: &str, path: &Path) {
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let Ok(mut out) = std::fs::File::create(path) else {
        return;
    };
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .build();
    let mut stream = client.api().logs(id, Some(options));
    let mut written = 0usize;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(output) => {
                let bytes = output.into_bytes();
                let room = LOG_CAP_BYTES.saturating_sub(written);
                let _ = out.write_all(&bytes[..bytes.len().min(room)]);
                written += bytes.len().min(room);
                if bytes.len() > room {
                    let _ = writeln!(out, "\n[runner: cut at {LOG_CAP_BYTES} bytes]");
                    break;
                }
            }
            Err(e) => {
                let _ = writeln!(out, "\n[runner: reading the logs failed: {e}]");
                break;
            }
        }
    }
}
