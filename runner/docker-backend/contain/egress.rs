//! The tests' way out under a network allowlist (issue 39 item 1): the egress proxy's relay,
//! started by the helper inside the jail, so no process the agent left running gets the
//! verifier's network.
//!
//! The runner binds the proxy's tests-side directory (its socket and the static relay) into
//! the jail only (`--egress-dir`); the trial container has only the agent's side, whose socket
//! the proxy closes for the whole verifier phase. Before joining the trial, still in the
//! jail's own mount namespace, the helper starts `bridge-relay serve --listen 127.0.0.1:0
//! --announce --peer-cgroup` from that directory:
//! - the socket is reachable only through the jail's root: a trial process could reach it
//!   only through `/proc/<pid>/root` of the helper or the relay, which the kernel grants only
//!   to a process whose capabilities are a superset of theirs (the helper holds
//!   `CAP_SYS_ADMIN`, the relay `CAP_SYS_PTRACE` and `CAP_DAC_READ_SEARCH`; no trial process
//!   holds any of them);
//! - the relay shares the trial's loopback (the tests must reach the agent's services), so a
//!   leftover can find its port in `/proc/net/tcp` and connect; the relay serves a connection
//!   only when every process holding its other end is in the jail's cgroup (the tests and
//!   what they start), which no trial process can join (`bridge-relay`'s `peer.rs`);
//! - the kernel picks the port (`:0`), so no leftover can hold it in advance and receive the
//!   tests' requests instead.
//!
//! The tests get `HTTP_PROXY`/`HTTPS_PROXY` (both cases) for that port. The relay dies with
//! the helper (`PR_SET_PDEATHSIG`) and is killed when the tests end.

use super::*;
use std::io::BufRead;
use std::os::raw::{c_int, c_ulong};
use std::process::{Child, Stdio};

/// `prctl` option: the signal the child gets when its parent dies.
const PR_SET_PDEATHSIG: c_int = 1;
/// The capabilities the relay keeps: reading other users' `/proc/<pid>/fd`.
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_SYS_PTRACE: u32 = 19;

/// The running relay and the port it took.
pub(crate) struct EgressRelay {
    child: Child,
    pub(crate) port: u16,
}

impl EgressRelay {
    /// The relay's pid (not the agent's leftover).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The proxy env the tests get: the relay, loopback kept direct.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}", self.port);
        let mut env: Vec<(String, String)> =
            ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
                .iter()
                .map(|name| ((*name).to_owned(), url.clone()))
                .collect();
        for name in ["NO_PROXY", "no_proxy"] {
            env.push((name.to_owned(), "localhost,127.0.0.1,::1".to_owned()));
        }
        env
    }
}

impl Drop for EgressRelay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the relay of `dir` (`bridge-relay` and `egress.sock` in it); returns once it
/// listens, with its port.
pub(crate) fn start(dir: &str) -> Result<EgressRelay, String> {
    let relay = format!("{dir}/bridge-relay");
    let socket = format!("{dir}/egress.sock");
    let mut command = std::process::Command::new(&relay);
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--announce",
            "--peer-cgroup",
        ])
        .arg("--socket")
        .arg(&socket)
        // The helper's stdin and stdout carry a warm jail's order and results.
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and only makes system calls.
    unsafe {
        command.pre_exec(|| {
            check(sys::prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0))?;
            // Exec'd as root, the relay's permitted set becomes this bounding set.
            for cap in 0..=CAP_LAST {
                if cap != CAP_DAC_READ_SEARCH && cap != CAP_SYS_PTRACE {
                    // Numbers the kernel does not know fail with EINVAL: nothing to drop.
                    sys::prctl(sys::PR_CAPBSET_DROP, c_ulong::from(cap), 0, 0, 0);
                }
            }
            check(sys::prctl(
                sys::PR_CAP_AMBIENT,
                sys::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            ))
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("starting the tests' egress relay {relay}: {e}"))?;
    let mut line = String::new();
    let read = child
        .stdout
        .take()
        .map(|out| io::BufReader::new(out).read_line(&mut line));
    let port = line
        .trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse::<u16>().ok());
    match (read, port) {
        (Some(Ok(_)), Some(port)) => Ok(EgressRelay { child, port }),
        _ => {
            let _ = child.kill();
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            Err(format!(
                "the tests' egress relay did not start listening ({status})"
            ))
        }
    }
}
