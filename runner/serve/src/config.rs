//! The server's settings (the flags of `runner serve`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use engine::LimitSettings;

use crate::access::Access;

/// Default wall-clock cap of one `exec`.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(120);
/// Default cap on an observation's output.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// Default idle time after which a session is closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Default number of sessions at once.
pub const DEFAULT_MAX_SESSIONS: usize = 8;
/// The largest request (HTTP body or WebSocket message) the server reads.
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// How a server runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where it listens (loopback by default).
    pub addr: SocketAddr,
    /// Sessions (WebSocket connections) at once; one more is refused with `CAPACITY_REACHED`.
    pub max_sessions: usize,
    /// A session without a message for this long is closed and its container removed.
    pub idle_timeout: Duration,
    /// The wall-clock cap of one command (`exec`, and `write_file`'s own).
    pub exec_timeout: Duration,
    /// An observation's output is cut after this many bytes, with a marker.
    pub max_output_bytes: usize,
    /// The directory episodes are recorded in (`<jobs_dir>/<job>/<episode>/`).
    pub job_dir: PathBuf,
    /// The job's id, which labels every container the server starts.
    pub job_id: String,
    /// The limits every episode's container runs under (from the task, as a trial's).
    pub limits: LimitSettings,
    /// Build task images from their Dockerfile even when they name a prebuilt image.
    pub force_build: bool,
    /// Who may send requests: served names, allowed origins, the credential.
    pub access: Access,
}
