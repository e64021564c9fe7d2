//! The proxy server: one unix socket per side (the agent's, mounted into the trial container;
//! the tests', mounted only where the tests run), one task per connection, the phase's policy
//! checked for every request and every connection cut when the phase changes.
//!
//! A socket serves only its own side's phases: while the tests run, the agent's socket is
//! closed (a process the agent left running that still holds it, or finds it, gets nothing),
//! and while the agent runs, the tests' socket is.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::allowlist::{Decision, Policy};
use crate::attempt_log::{self, Attempt, PhaseCounts};
use crate::request::{self, MAX_HEAD_BYTES, ProxyRequest};
use crate::resolver::Resolver;

/// The socket's file name in each side's directory.
pub const SOCKET_FILE_NAME: &str = "egress.sock";

/// Whose phases a socket serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Environment setup and the agent's run (the socket mounted into the trial container).
    Agent,
    /// The tests (the socket mounted only into the verifier jail or a separate verifier's
    /// container).
    Verifier,
}

impl Side {
    fn index(self) -> usize {
        match self {
            Side::Agent => 0,
            Side::Verifier => 1,
        }
    }
}
/// Connections open at once; more wait for a slot.
const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to one destination address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The phase the proxy serves: its name, policy and log.
#[derive(Debug, Clone)]
struct Phase {
    name: String,
    policy: Policy,
    log: Option<PathBuf>,
}

struct Shared {
    resolver: Resolver,
    /// Each side's phase (by [`Side::index`]): the one serving, or the other closed.
    phases: [watch::Sender<Arc<Phase>>; 2],
    counts: Mutex<BTreeMap<String, PhaseCounts>>,
    slots: Semaphore,
}

/// A trial's egress proxy; stops (and removes its sockets) when dropped.
pub struct EgressProxy {
    /// Each side's directory (by [`Side::index`]).
    dirs: [PathBuf; 2],
    shared: Arc<Shared>,
    servers: [JoinHandle<()>; 2],
}

impl EgressProxy {
    /// Listens on `<agent_dir>/egress.sock` for the agent's side and on
    /// `<verifier_dir>/egress.sock` for the tests', every attempt refused until
    /// [`Self::set_phase`].
    pub async fn start(
        agent_dir: &Path,
        verifier_dir: &Path,
        resolver: Resolver,
    ) -> io::Result<EgressProxy> {
        let dirs = [agent_dir.to_path_buf(), verifier_dir.to_path_buf()];
        let mut listeners = Vec::new();
        for dir in &dirs {
            let socket = dir.join(SOCKET_FILE_NAME);
            let _ = std::fs::remove_file(&socket);
            listeners.push(UnixListener::bind(&socket)?);
        }
        let closed = || {
            watch::channel(Arc::new(Phase {
                name: "between phases".into(),
                policy: Policy::Closed,
                log: None,
            }))
            .0
        };
        let shared = Arc::new(Shared {
            resolver,
            phases: [closed(), closed()],
            counts: Mutex::new(BTreeMap::new()),
            slots: Semaphore::new(MAX_CONNECTIONS),
        });
        let verifier = listeners.pop().expect("two listeners");
        let agent = listeners.pop().expect("two listeners");
        let servers = [
            tokio::spawn(serve(agent, shared.clone(), Side::Agent)),
            tokio::spawn(serve(verifier, shared.clone(), Side::Verifier)),
        ];
        Ok(EgressProxy {
            dirs,
            shared,
            servers,
        })
    }

    /// The directory holding `side`'s socket (bind-mount it where that side runs).
    pub fn socket_dir(&self, side: Side) -> &Path {
        &self.dirs[side.index()]
    }

    /// `side`'s socket's path on the host.
    pub fn socket_path(&self, side: Side) -> PathBuf {
        self.socket_dir(side).join(SOCKET_FILE_NAME)
    }

    /// Serves phase `name` of `side` under `policy` from now on, logging its attempts to
    /// `log`, and closes the other side (its attempts then go to its last log, as refused, under
    /// `<its last phase> (closed)`). Every connection opened before, on either side, is cut, so
    /// nothing a phase opened outlives it.
    pub fn set_phase(&self, side: Side, name: &str, policy: Policy, log: Option<PathBuf>) {
        let other = &self.shared.phases[1 - side.index()];
        let last = other.borrow().clone();
        let closed_name = match last.name.strip_suffix(" (closed)") {
            Some(_) => last.name.clone(),
            None if last.log.is_none() => last.name.clone(),
            None => format!("{} (closed)", last.name),
        };
        other.send_replace(Arc::new(Phase {
            name: closed_name,
            policy: Policy::Closed,
            log: last.log.clone(),
        }));
        self.shared.phases[side.index()].send_replace(Arc::new(Phase {
            name: name.to_owned(),
            policy,
            log,
        }));
    }

    /// Attempts and refusals so far, by phase name.
    pub fn counts(&self) -> BTreeMap<String, PhaseCounts> {
        self.shared
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        for (server, phase) in self.servers.iter().zip(&self.shared.phases) {
            server.abort();
            // Connections still open end with the phase channel's sender.
            phase.send_replace(Arc::new(Phase {
                name: "closed".into(),
                policy: Policy::Closed,
                log: None,
            }));
        }
        for side in [Side::Agent, Side::Verifier] {
            let _ = std::fs::remove_file(self.socket_path(side));
        }
    }
}

async fn serve(listener: UnixListener, shared: Arc<Shared>, side: Side) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let Ok(_slot) = shared.slots.acquire().await else {
                return;
            };
            let mut phase_changes = shared.phases[side.index()].subscribe();
            let phase = phase_changes.borrow_and_update().clone();
            if let Some(attempt) = handle(stream, &shared, &phase, phase_changes).await {
                record(&shared, &phase, &attempt);
            }
        });
    }
}

fn record(shared: &Shared, phase: &Phase, attempt: &Attempt) {
    attempt_log::count(
        &mut shared.counts.lock().unwrap_or_else(|e| e.into_inner()),
        attempt,
    );
    if let Some(log) = &phase.log {
        // The log is evidence, not a gate: a full disk must not break the agent's traffic.
        let _ = attempt_log::append(log, attempt);
    }
}

/// Serves one connection to its end; the attempt to record, `None` when nothing was asked.
async fn handle(
    mut client: UnixStream,
    shared: &Shared,
    phase: &Phase,
    mut phase_changes: watch::Receiver<Arc<Phase>>,
) -> Option<Attempt> {
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(read))) => read,
        Ok(Ok(None)) => return None,
        Ok(Err(error)) => {
            let reason = error.to_string();
            let _ = respond(&mut client, 400, &reason).await;
            drain(&mut client).await;
            return Some(attempt(phase, "", "", 0, Some(reason)));
        }
        Err(_) => {
            let reason = "no request head within 30 s".to_owned();
            let _ = respond(&mut client, 408, &reason).await;
            return Some(attempt(phase, "", "", 0, Some(reason)));
        }
    };
    let request = match request::parse(&head) {
        Ok(request) => request,
        Err(error) => {
            let reason = error.to_string();
            let _ = respond(&mut client, 400, &reason).await;
            return Some(attempt(phase, "", "", 0, Some(reason)));
        }
    };
    let mut record = attempt(phase, &request.method, &request.host, request.port, None);
    let upstream = match connect(shared, &phase.policy, &request).await {
        Ok((upstream, address)) => {
            record.address = Some(address.to_string());
            upstream
        }
        Err((status, reason)) => {
            let _ = respond(&mut client, status, &reason).await;
            record.reason = Some(reason);
            return Some(record);
        }
    };
    record.allowed = true;
    let counted = Counted::default();
    tokio::select! {
        () = relay(client, upstream, &request, &rest, &counted) => {}
        _ = phase_changes.changed() => {
            record.reason = Some("cut when the phase ended".into());
        }
    }
    record.bytes_sent = counted.sent.load(Ordering::Relaxed);
    record.bytes_received = counted.received.load(Ordering::Relaxed);
    Some(record)
}

fn attempt(phase: &Phase, method: &str, host: &str, port: u16, reason: Option<String>) -> Attempt {
    Attempt {
        time: chrono::Utc::now(),
        phase: phase.name.clone(),
        method: method.to_owned(),
        host: host.to_owned(),
        port,
        allowed: false,
        reason,
        address: None,
        bytes_sent: 0,
        bytes_received: 0,
    }
}

/// Why a client's request head could not be read (answered with 400 and recorded).
#[derive(Debug, thiserror::Error)]
enum HeadError {
    /// The socket failed mid-read.
    #[error("reading the request: {0}")]
    Read(#[source] std::io::Error),
    /// The client hung up inside the head.
    #[error("the connection closed before the request head ended")]
    ClosedEarly,
    /// The head never ended within the bound a real client keeps to.
    #[error("the request head is over {MAX_HEAD_BYTES} bytes")]
    TooLong,
}

/// Reads up to the end of the head: the head, and whatever bytes came after it.
async fn read_head(client: &mut UnixStream) -> Result<Option<(Vec<u8>, Vec<u8>)>, HeadError> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await.map_err(HeadError::Read)?;
        if n == 0 {
            return if buffer.is_empty() {
                Ok(None)
            } else {
                Err(HeadError::ClosedEarly)
            };
        }
        // Look for the end only where it can newly be (the last 3 bytes before may start it).
        let from = buffer.len().saturating_sub(3);
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = request::head_end(&buffer[from..]).map(|end| from + end) {
            // The limit is exact: a head that ends in the same read as it passes the limit
            // is still too long.
            if end > MAX_HEAD_BYTES {
                return Err(HeadError::TooLong);
            }
            let rest = buffer.split_off(end);
            return Ok(Some((buffer, rest)));
        }
        if buffer.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::TooLong);
        }
    }
}

/// Checks the host, resolves it, checks each address and connects to the first that answers.
async fn connect(
    shared: &Shared,
    policy: &Policy,
    request: &ProxyRequest,
) -> Result<(TcpStream, SocketAddr), (u16, String)> {
    let pinned_port = shared.resolver.pinned_port(&request.host, request.port);
    let host_decision = policy.decide_host(&request.host, request.port, pinned_port);
    if let Decision::Refuse(reason) = &host_decision {
        return Err((403, reason.clone()));
    }
    let addresses = shared
        .resolver
        .resolve(&request.host, request.port)
        .await
        .map_err(|e| (502, format!("resolving {}: {e}", request.host)))?;
    let mut last = format!("{} resolved to no address", request.host);
    let mut refused = None;
    for address in addresses {
        if let Decision::Refuse(reason) = policy.decide_address(&host_decision, address.ip()) {
            refused = Some(reason);
            continue;
        }
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok((stream, address)),
            Ok(Err(e)) => last = format!("connecting to {address}: {e}"),
            Err(_) => last = format!("connecting to {address}: no answer within 10 s"),
        }
    }
    Err(match refused {
        Some(reason) => (403, reason),
        None => (502, last),
    })
}

/// Bytes moved so far, readable after the relay is cut.
#[derive(Default)]
struct Counted {
    sent: AtomicU64,
    received: AtomicU64,
}

/// Carries bytes both ways until both sides are done, counting them as they go.
async fn relay(
    mut client: UnixStream,
    mut upstream: TcpStream,
    request: &ProxyRequest,
    rest: &[u8],
    counted: &Counted,
) {
    let opened = match &request.forward_head {
        Some(head) => upstream.write_all(head).await,
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await
        }
    };
    if opened.is_err() || upstream.write_all(rest).await.is_err() {
        return;
    }
    let head = request.forward_head.as_ref().map_or(0, Vec::len);
    counted
        .sent
        .fetch_add((head + rest.len()) as u64, Ordering::Relaxed);
    let (mut client_read, mut client_write) = client.split();
    let (mut upstream_read, mut upstream_write) = upstream.split();
    let up = copy_counting(&mut client_read, &mut upstream_write, &counted.sent);
    let down = copy_counting(&mut upstream_read, &mut client_write, &counted.received);
    tokio::join!(up, down);
}

/// Copies until end of input (then shuts the writer, half-closing that direction) or an error.
async fn copy_counting<R, W>(reader: &mut R, writer: &mut W, counter: &AtomicU64)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if writer.write_all(&buffer[..n]).await.is_err() {
                    break;
                }
                counter.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
    let _ = writer.shutdown().await;
}

/// Reads (and drops) what the client still sends, a little while: closing a unix socket with
/// unread bytes resets it, and the client would lose the answer it was just sent.
async fn drain(client: &mut UnixStream) {
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    let reading = async {
        while left > 0 {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), reading).await;
}

async fn respond(client: &mut UnixStream, status: u16, reason: &str) -> io::Result<()> {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        _ => "Bad Gateway",
    };
    let body = format!("runner egress proxy: {reason}\n");
    let response = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allowlist::Allowlist;

    /// A tiny HTTP server on loopback answering every request with `name`.
    async fn origin(name: &'static str) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 4096];
                    let mut seen = Vec::new();
                    while request::head_end(&seen).is_none() {
                        let Ok(n) = stream.read(&mut buffer).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buffer[..n]);
                    }
                    let body = format!(
                        "{name} saw {}",
                        String::from_utf8_lossy(&seen)
                            .lines()
                            .next()
                            .unwrap_or_default()
                    );
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        address
    }

    /// A proxy with each side's socket in a directory of its own under `dir`.
    async fn start_in(dir: &Path, resolver: Resolver) -> EgressProxy {
        let (agent, verifier) = (dir.join("agent-side"), dir.join("verifier-side"));
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&verifier).unwrap();
        EgressProxy::start(&agent, &verifier, resolver)
            .await
            .unwrap()
    }

    async fn ask(proxy: &EgressProxy, head: &str) -> String {
        ask_on(proxy, Side::Agent, head).await
    }

    async fn ask_on(proxy: &EgressProxy, side: Side, head: &str) -> String {
        let mut stream = UnixStream::connect(proxy.socket_path(side)).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer)).await;
        answer
    }

    #[tokio::test]
    async fn the_allowlist_decides_who_is_reached_and_every_attempt_is_logged() {
        let allowed = origin("allowed").await;
        let other = origin("other").await;
        let dir = tempfile::tempdir().unwrap();
        let mut resolver = Resolver::system();
        resolver.pin("allowed.test", allowed.ip());
        resolver.list_port("allowed.test", allowed.port());
        resolver.pin("other.test", other.ip());
        resolver.list_port("other.test", other.port());
        resolver.pin("sneaky.wild.test", other.ip());
        resolver.list_port("sneaky.wild.test", other.port());
        let proxy = start_in(dir.path(), resolver).await;
        assert!(
            ask(&proxy, "GET http://allowed.test/ HTTP/1.1\r\n\r\n")
                .await
                .contains("403"),
            "closed until a phase is set"
        );
        let log = dir.path().join("agent/network.jsonl");
        let hosts = ["allowed.test".to_owned(), "*.wild.test".to_owned()];
        proxy.set_phase(
            Side::Agent,
            "agent",
            Policy::Allow(Allowlist::parse(&hosts).unwrap()),
            Some(log.clone()),
        );

        let port = allowed.port();
        let answer = ask(&proxy, &format!("GET http://allowed.test:{port}/x HTTP/1.1\r\nHost: allowed.test:{port}\r\nProxy-Connection: keep-alive\r\n\r\n")).await;
        assert!(answer.contains("allowed saw GET /x HTTP/1.1"), "{answer}");
        let tunnel = ask(
            &proxy,
            &format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(
            tunnel.starts_with("HTTP/1.1 200 Connection Established"),
            "{tunnel}"
        );
        assert!(tunnel.contains("allowed saw GET /t"), "{tunnel}");
        let refused = [
            format!("GET http://other.test:{}/ HTTP/1.1\r\n\r\n", other.port()),
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
            format!("CONNECT sneaky.wild.test:{} HTTP/1.1\r\n\r\n", other.port()),
        ];
        for head in &refused {
            let answer = ask(&proxy, head).await;
            assert!(answer.starts_with("HTTP/1.1 403"), "{head}: {answer}");
        }
        assert!(
            ask(&proxy, "NONSENSE\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 400")
        );

        let lines: Vec<Attempt> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 6, "{lines:?}");
        assert_eq!(lines.iter().filter(|a| a.allowed).count(), 2);
        assert!(lines.iter().all(|a| a.phase == "agent"));
        let sneaky = lines.iter().find(|a| a.host == "sneaky.wild.test").unwrap();
        assert!(
            sneaky.reason.as_deref().unwrap().contains("loopback"),
            "{sneaky:?}"
        );
        assert!(
            lines
                .iter()
                .filter(|a| a.allowed)
                .all(|a| a.bytes_received > 0 && a.bytes_sent > 0)
        );
        assert_eq!(
            proxy.counts()["agent"],
            PhaseCounts {
                attempts: 6,
                refused: 4
            }
        );
    }

    #[tokio::test]
    async fn a_phase_change_cuts_the_tunnels_the_phase_opened() {
        let allowed = origin("allowed").await;
        let dir = tempfile::tempdir().unwrap();
        let mut resolver = Resolver::system();
        resolver.pin("allowed.test", allowed.ip());
        resolver.list_port("allowed.test", allowed.port());
        let proxy = start_in(dir.path(), resolver).await;
        let list = Allowlist::parse(&["allowed.test".to_owned()]).unwrap();
        proxy.set_phase(Side::Agent, "agent", Policy::Allow(list), None);
        let mut tunnel = UnixStream::connect(proxy.socket_path(Side::Agent))
            .await
            .unwrap();
        tunnel
            .write_all(
                format!("CONNECT allowed.test:{} HTTP/1.1\r\n\r\n", allowed.port()).as_bytes(),
            )
            .await
            .unwrap();
        let mut established = [0u8; 39];
        tunnel.read_exact(&mut established).await.unwrap();
        assert!(established.starts_with(b"HTTP/1.1 200"));
        proxy.set_phase(Side::Verifier, "verifier", Policy::Closed, None);
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(5), tunnel.read_to_end(&mut rest)).await;
        assert!(matches!(read, Ok(Ok(0))), "the tunnel was cut: {read:?}");
        assert_eq!(proxy.counts()["agent"].attempts, 1);
    }

    /// A proxy for `allowed.test` (pinned to a loopback origin, its port listed) and
    /// `svc.test:<port>` (pinned, port listed in the entry), with the origin's port.
    async fn edge_proxy(dir: &Path) -> (EgressProxy, u16) {
        let allowed = origin("allowed").await;
        let mut resolver = Resolver::system();
        resolver.pin("allowed.test", allowed.ip());
        resolver.list_port("allowed.test", allowed.port());
        resolver.pin("svc.test", allowed.ip());
        resolver.pin("other.test", allowed.ip());
        resolver.list_port("other.test", allowed.port());
        let proxy = start_in(dir, resolver).await;
        let hosts = [
            "allowed.test".to_owned(),
            format!("svc.test:{}", allowed.port()),
        ];
        let list = Allowlist::parse(&hosts).unwrap();
        proxy.set_phase(Side::Agent, "agent", Policy::Allow(list), None);
        (proxy, allowed.port())
    }

    #[tokio::test]
    async fn a_host_header_naming_another_host_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (proxy, port) = edge_proxy(dir.path()).await;
        let fronted = ask(
            &proxy,
            &format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: other.test:{port}\r\n\r\n"),
        )
        .await;
        assert!(fronted.starts_with("HTTP/1.1 400"), "{fronted}");
        assert!(fronted.contains("Host header"), "{fronted}");
        let honest = ask(
            &proxy,
            &format!(
                "GET http://allowed.test:{port}/h HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n"
            ),
        )
        .await;
        assert!(honest.contains("allowed saw GET /h"), "{honest}");
        assert_eq!(proxy.counts()["agent"].refused, 1);
    }

    #[tokio::test]
    async fn upper_case_and_trailing_dot_names_take_the_policy_and_the_pin() {
        let dir = tempfile::tempdir().unwrap();
        let (proxy, port) = edge_proxy(dir.path()).await;
        for host in ["ALLOWED.TEST.", "Allowed.Test", "allowed.test."] {
            let answer = ask(
                &proxy,
                &format!("CONNECT {host}:{port} HTTP/1.1\r\n\r\nGET /n HTTP/1.1\r\n\r\n"),
            )
            .await;
            // The pin (loopback) answered: the host's resolver knows no `allowed.test`.
            assert!(answer.contains("allowed saw GET /n"), "{host}: {answer}");
        }
        let other = ask(
            &proxy,
            &format!("CONNECT OTHER.TEST.:{port} HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(other.starts_with("HTTP/1.1 403"), "{other}");
    }

    #[tokio::test]
    async fn a_name_pinned_to_loopback_reaches_only_its_listed_port() {
        let dir = tempfile::tempdir().unwrap();
        let (proxy, port) = edge_proxy(dir.path()).await;
        // Another loopback service of the host, on a port nobody listed.
        let elsewhere = origin("elsewhere").await.port();
        for target in [
            format!("allowed.test:{elsewhere}"),
            "allowed.test:22".to_owned(),
            "allowed.test:443".to_owned(),
            "svc.test:443".to_owned(),
            format!("svc.test:{elsewhere}"),
        ] {
            let answer = ask(&proxy, &format!("CONNECT {target} HTTP/1.1\r\n\r\n")).await;
            assert!(answer.starts_with("HTTP/1.1 403"), "{target}: {answer}");
        }
        for target in [format!("allowed.test:{port}"), format!("svc.test:{port}")] {
            let answer = ask(
                &proxy,
                &format!("CONNECT {target} HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\n"),
            )
            .await;
            assert!(answer.contains("allowed saw GET /p"), "{target}: {answer}");
        }
    }

    #[tokio::test]
    async fn the_head_limit_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let (proxy, port) = edge_proxy(dir.path()).await;
        // A head of exactly `size` bytes: request line, Host, one padding header, blank line.
        let head = |size: usize| {
            let start = format!(
                "GET http://allowed.test:{port}/l HTTP/1.1\r\nHost: allowed.test:{port}\r\nX-Pad: "
            );
            let pad = size - start.len() - "\r\n\r\n".len();
            format!("{start}{}\r\n\r\n", "a".repeat(pad))
        };
        assert_eq!(head(MAX_HEAD_BYTES).len(), 16 * 1024);
        let at_limit = ask(&proxy, &head(MAX_HEAD_BYTES)).await;
        assert!(at_limit.contains("allowed saw GET /l"), "{at_limit}");
        for size in [MAX_HEAD_BYTES + 1, MAX_HEAD_BYTES + 2000, 20 * 1000] {
            let over = ask(&proxy, &head(size)).await;
            assert!(over.starts_with("HTTP/1.1 400"), "{size}: {over}");
            assert!(over.contains("over 16384 bytes"), "{over}");
        }
    }

    #[tokio::test]
    async fn each_side_is_served_only_in_its_own_phases() {
        let allowed = origin("allowed").await;
        let other = origin("other").await;
        let dir = tempfile::tempdir().unwrap();
        let mut resolver = Resolver::system();
        for (name, origin) in [("allowed.test", allowed), ("other.test", other)] {
            resolver.pin(name, origin.ip());
            resolver.list_port(name, origin.port());
        }
        let proxy = start_in(dir.path(), resolver).await;
        let agent_log = dir.path().join("agent/network.jsonl");
        let verifier_log = dir.path().join("verifier/network.jsonl");
        for log in [&agent_log, &verifier_log] {
            std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        }
        let list = |host: &str| Policy::Allow(Allowlist::parse(&[host.to_owned()]).unwrap());
        let get = |origin: SocketAddr, host: &str| {
            format!(
                "GET http://{host}:{}/ HTTP/1.1\r\nHost: {host}:{}\r\n\r\n",
                origin.port(),
                origin.port()
            )
        };
        proxy.set_phase(
            Side::Agent,
            "agent",
            list("allowed.test"),
            Some(agent_log.clone()),
        );
        assert!(
            ask_on(&proxy, Side::Agent, &get(allowed, "allowed.test"))
                .await
                .contains("allowed saw")
        );
        let early = ask_on(&proxy, Side::Verifier, &get(other, "other.test")).await;
        assert!(
            early.starts_with("HTTP/1.1 403"),
            "the tests' side is closed: {early}"
        );
        // A tunnel the agent opened, held by a process it leaves running.
        let mut held = UnixStream::connect(proxy.socket_path(Side::Agent))
            .await
            .unwrap();
        held.write_all(
            format!("CONNECT allowed.test:{} HTTP/1.1\r\n\r\n", allowed.port()).as_bytes(),
        )
        .await
        .unwrap();
        let mut established = [0u8; 39];
        held.read_exact(&mut established).await.unwrap();

        proxy.set_phase(
            Side::Verifier,
            "verifier",
            list("other.test"),
            Some(verifier_log.clone()),
        );
        let mut rest = Vec::new();
        let cut = tokio::time::timeout(Duration::from_secs(5), held.read_to_end(&mut rest)).await;
        assert!(
            matches!(cut, Ok(Ok(0))),
            "the agent's tunnel was cut: {cut:?}"
        );
        // The agent's side now reaches nothing, not even the verifier's listed host.
        for host in ["other.test", "allowed.test"] {
            let origin = if host == "other.test" { other } else { allowed };
            let answer = ask_on(&proxy, Side::Agent, &get(origin, host)).await;
            assert!(answer.starts_with("HTTP/1.1 403"), "{host}: {answer}");
        }
        let tests = ask_on(&proxy, Side::Verifier, &get(other, "other.test")).await;
        assert!(tests.contains("other saw"), "{tests}");

        // Each attempt is written as its connection ends, just after the client saw the end.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let read = |path: &Path| -> Vec<Attempt> {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let verifier = read(&verifier_log);
        assert_eq!(
            verifier.len(),
            1,
            "only the tests' own request: {verifier:?}"
        );
        assert!(verifier[0].allowed && verifier[0].host == "other.test");
        let agent = read(&agent_log);
        let leftovers: Vec<_> = agent
            .iter()
            .filter(|a| a.phase == "agent (closed)")
            .collect();
        assert_eq!(leftovers.len(), 2, "{agent:?}");
        assert!(leftovers.iter().all(|a| !a.allowed));
    }
}
