//! `bridge-relay`: the in-container end of the LLM bridge.
//!
//! It listens on a loopback TCP address inside the task container and copies every connection,
//! byte for byte in both directions, to the bridge's unix socket, which the runner bind-mounts
//! into the container. Agents are then given `http://127.0.0.1:<port>` as their base URL: every
//! HTTP client can use that, while few can be told to speak HTTP over a unix socket.
//!
//! It is std-only (no async runtime, no DNS, no TLS) so that the runner can build it as one
//! static executable that runs on any Linux task image, with or without Python or a libc.
//!
//! ```text
//! bridge-relay serve --listen 127.0.0.1:4141 --socket /run/runner-llm-bridge/bridge.sock
//! bridge-relay serve --listen 127.0.0.1:0 --socket S --announce --peer-cgroup  # the jail's
//! bridge-relay wait --addr 127.0.0.1:4141 --timeout-ms 5000   # exits 0 once serve listens
//! bridge-relay end-turn --addr 127.0.0.1:4141 --token TOKEN   # the agent's turn is over
//! bridge-relay --version
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

mod peer;

/// Connections served at once; more are closed at once rather than growing threads unbounded.
const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Stack for each copying thread: they only move bytes through a small buffer.
const THREAD_STACK_BYTES: usize = 128 * 1024;

const USAGE: &str = "usage:
  bridge-relay serve --listen 127.0.0.1:PORT --socket PATH [--max-connections N]
                    [--announce] [--peer-cgroup]
  bridge-relay wait --addr 127.0.0.1:PORT [--timeout-ms N]
  bridge-relay end-turn --addr 127.0.0.1:PORT --token TOKEN [--timeout-ms N]
  bridge-relay --version";

#[derive(Debug, PartialEq, Eq)]
enum Command {
    Serve {
        listen: SocketAddr,
        socket: PathBuf,
        max_connections: usize,
        /// Print `port N` on stdout once listening (for `--listen 127.0.0.1:0`).
        announce: bool,
        /// Relay only connections whose processes are all in the relay's cgroup (`peer.rs`).
        peer_cgroup: bool,
    },
    Wait {
        addr: SocketAddr,
        timeout: Duration,
    },
    EndTurn {
        addr: SocketAddr,
        token: String,
        timeout: Duration,
    },
    Version,
}

fn parse_args(args: &[String]) -> Result<Command, String> {
    let (verb, rest) = args.split_first().ok_or("no command given")?;
    let mut listen = None;
    let mut socket = None;
    let mut addr = None;
    let mut token = None;
    let mut max_connections = DEFAULT_MAX_CONNECTIONS;
    let (mut announce, mut peer_cgroup) = (false, false);
    let mut timeout = Duration::from_secs(10);
    let mut iter = rest.iter();
    while let Some(flag) = iter.next() {
        match flag.as_str() {
            "--announce" => {
                announce = true;
                continue;
            }
            "--peer-cgroup" => {
                peer_cgroup = true;
                continue;
            }
            _ => {}
        }
        let mut value = || iter.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => listen = Some(parse_loopback(value()?)?),
            "--addr" => addr = Some(parse_loopback(value()?)?),
            "--socket" => socket = Some(PathBuf::from(value()?)),
            "--token" => token = Some(value()?.to_owned()),
            "--max-connections" => {
                max_connections = value()?
                    .parse()
                    .map_err(|_| "--max-connections needs a positive number".to_owned())?
            }
            "--timeout-ms" => {
                timeout = Duration::from_millis(
                    value()?
                        .parse()
                        .map_err(|_| "--timeout-ms needs a number of milliseconds".to_owned())?,
                )
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    match verb.as_str() {
        "serve" => Ok(Command::Serve {
            listen: listen.ok_or("serve needs --listen 127.0.0.1:PORT")?,
            socket: socket.ok_or("serve needs --socket PATH (the bind-mounted bridge socket)")?,
            max_connections: max_connections.max(1),
            announce,
            peer_cgroup,
        }),
        "wait" => Ok(Command::Wait {
            addr: addr.ok_or("wait needs --addr 127.0.0.1:PORT")?,
            timeout,
        }),
        "end-turn" => Ok(Command::EndTurn {
            addr: addr.ok_or("end-turn needs --addr 127.0.0.1:PORT")?,
            token: token.ok_or("end-turn needs --token TOKEN")?,
            timeout,
        }),
        "--version" | "version" => Ok(Command::Version),
        other => Err(format!("unknown command '{other}'")),
    }
}

/// Only loopback addresses: the relay must never be reachable from outside the container.
/// Parsed as a socket address, never resolved, so no DNS (and no NSS) is ever involved.
fn parse_loopback(text: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = text
        .parse()
        .map_err(|_| format!("'{text}' is not an address like 127.0.0.1:4141"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "'{text}' is not a loopback address; the relay only listens on loopback"
        ));
    }
    Ok(addr)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse_args(&args) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("bridge-relay: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Version => {
            println!(
                "bridge-relay {}",
                option_env!("CARGO_PKG_VERSION").unwrap_or("unversioned")
            );
            ExitCode::SUCCESS
        }
        Command::Wait { addr, timeout } => match wait_for(addr, timeout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("bridge-relay: {message}");
                ExitCode::from(1)
            }
        },
        Command::EndTurn {
            addr,
            token,
            timeout,
        } => match end_turn(addr, &token, timeout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("bridge-relay: {message}");
                ExitCode::from(1)
            }
        },
        Command::Serve {
            listen,
            socket,
            max_connections,
            announce,
            peer_cgroup,
        } => match serve(listen, &socket, max_connections, announce, peer_cgroup) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("bridge-relay: cannot listen on {listen}: {error}");
                ExitCode::from(1)
            }
        },
    }
}

fn wait_for(addr: SocketAddr, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => {
                return Err(format!(
                    "nothing listens on {addr} after {timeout:?}: {error}"
                ));
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Tells the bridge the agent's turn is over (`POST /runner/end-turn`) and waits for its
/// answer: once this returns 0 the bridge serves no more calls of the trial.
fn end_turn(addr: SocketAddr, token: &str, timeout: Duration) -> Result<(), String> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot reach the relay at {addr}: {e}"))?;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let request = format!(
        "POST /runner/end-turn HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("cannot send the end of the turn: {e}"))?;
    let mut answer = Vec::new();
    let _ = stream.take(4096).read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.split_whitespace().nth(1).unwrap_or("");
    if status.starts_with('2') {
        Ok(())
    } else {
        Err(format!(
            "the bridge did not end the turn: {}",
            answer.lines().next().unwrap_or("no answer")
        ))
    }
}

fn serve(
    listen: SocketAddr,
    socket: &Path,
    max_connections: usize,
    announce: bool,
    peer_cgroup: bool,
) -> io::Result<()> {
    let listener = TcpListener::bind(listen)?;
    let bound = listener.local_addr()?;
    eprintln!("bridge-relay: listening on {bound} -> {}", socket.display());
    if announce {
        let mut stdout = io::stdout().lock();
        writeln!(stdout, "port {}", bound.port())?;
        stdout.flush()?;
    }
    let active = Arc::new(AtomicUsize::new(0));
    for incoming in listener.incoming() {
        let client = match incoming {
            Ok(client) => client,
            // A failed accept (the client gave up, out of descriptors) ends that one only.
            Err(error) => {
                eprintln!("bridge-relay: accept failed: {error}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if peer_cgroup && let Err(why) = peer::check(&client) {
            eprintln!("bridge-relay: refused: {why}");
            continue;
        }
        if active.load(Ordering::Acquire) >= max_connections {
            eprintln!("bridge-relay: {max_connections} connections already open; refusing one");
            continue;
        }
        active.fetch_add(1, Ordering::AcqRel);
        let socket = socket.to_owned();
        let guard = ActiveGuard(active.clone());
        let spawned = thread::Builder::new()
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || {
                let _guard = guard;
                if let Err(error) = relay(client, &socket) {
                    eprintln!(
                        "bridge-relay: connection to {} failed: {error}",
                        socket.display()
                    );
                }
            });
        if let Err(error) = spawned {
            eprintln!("bridge-relay: cannot start a thread: {error}");
        }
    }
    Ok(())
}

/// Counts a connection as open until its threads are done.
struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Copies one client connection to a fresh connection to the socket and back. Each direction
/// ends with a half-close, so HTTP keep-alive and streamed responses behave as over direct TCP.
fn relay(client: TcpStream, socket: &Path) -> io::Result<()> {
    let upstream = UnixStream::connect(socket)?;
    client.set_nodelay(true)?;
    let client_read = client.try_clone()?;
    let upstream_write = upstream.try_clone()?;
    let to_bridge = thread::Builder::new()
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || {
            let result = copy(client_read, &upstream_write);
            let _ = upstream_write.shutdown(Shutdown::Write);
            result
        })?;
    let back = copy(upstream, &client);
    let _ = client.shutdown(Shutdown::Write);
    let forward = to_bridge.join().unwrap_or(Ok(()));
    back.and(forward)
}

fn copy(mut from: impl Read, mut to: impl Write) -> io::Result<()> {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            // The peer went away: that ends this direction, it is not the relay's failure.
            Err(error) if error.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(error) => return Err(error),
        };
        match to.write_all(&buffer[..n]) {
            Ok(()) => {}
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                return Ok(());
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn arguments_are_checked() {
        assert_eq!(
            parse_args(&args("serve --listen 127.0.0.1:4141 --socket /s")).unwrap(),
            Command::Serve {
                listen: "127.0.0.1:4141".parse().unwrap(),
                socket: "/s".into(),
                max_connections: DEFAULT_MAX_CONNECTIONS,
                announce: false,
                peer_cgroup: false,
            }
        );
        assert!(matches!(
            parse_args(&args(
                "serve --listen 127.0.0.1:0 --socket /s --announce --peer-cgroup"
            )),
            Ok(Command::Serve {
                announce: true,
                peer_cgroup: true,
                ..
            })
        ));
        assert!(
            parse_args(&args("serve --listen 0.0.0.0:4141 --socket /s"))
                .unwrap_err()
                .contains("loopback")
        );
        assert!(parse_args(&args("serve --listen localhost:1 --socket /s")).is_err());
        assert!(
            parse_args(&args("serve --listen 127.0.0.1:1"))
                .unwrap_err()
                .contains("--socket")
        );
        assert!(
            parse_args(&args("serve --bogus"))
                .unwrap_err()
                .contains("--bogus")
        );
        assert_eq!(parse_args(&args("--version")).unwrap(), Command::Version);
        assert_eq!(
            parse_args(&args(
                "end-turn --addr 127.0.0.1:4141 --token runner-trial-x"
            ))
            .unwrap(),
            Command::EndTurn {
                addr: "127.0.0.1:4141".parse().unwrap(),
                token: "runner-trial-x".into(),
                timeout: Duration::from_secs(10),
            }
        );
        assert!(parse_args(&args("end-turn --addr 127.0.0.1:4141")).is_err());
    }

    /// A real unix-socket echo server behind the relay: bytes go both ways, half-closes
    /// propagate, and many connections run at once.
    #[test]
    fn relays_connections_both_ways() {
        let dir = std::env::temp_dir().join(format!("bridge-relay-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("s.sock");
        let _ = std::fs::remove_file(&socket);
        let unix = UnixListener::bind(&socket).unwrap();
        thread::spawn(move || {
            for stream in unix.incoming() {
                let mut stream = stream.unwrap();
                thread::spawn(move || {
                    let mut request = Vec::new();
                    stream.read_to_end(&mut request).unwrap();
                    request.reverse();
                    stream.write_all(&request).unwrap();
                });
            }
        });
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = probe.local_addr().unwrap();
        drop(probe);
        let socket_for_relay = socket.clone();
        // The peer check on: this test's own threads are in the relay's cgroup.
        thread::spawn(move || serve(listen, &socket_for_relay, 64, false, true).unwrap());
        wait_for(listen, Duration::from_secs(5)).unwrap();

        let clients: Vec<_> = (0..16)
            .map(|i| {
                thread::spawn(move || {
                    let mut stream = TcpStream::connect(listen).unwrap();
                    let payload: Vec<u8> =
                        (0..100_000u32).map(|b| (b as u8).wrapping_add(i)).collect();
                    stream.write_all(&payload).unwrap();
                    stream.shutdown(Shutdown::Write).unwrap();
                    let mut answer = Vec::new();
                    stream.read_to_end(&mut answer).unwrap();
                    let mut expected = payload;
                    expected.reverse();
                    assert_eq!(answer, expected);
                })
            })
            .collect();
        for client in clients {
            client.join().unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wait_gives_up_with_a_message() {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let error = wait_for(addr, Duration::from_millis(100)).unwrap_err();
        assert!(error.contains("nothing listens"), "{error}");
    }

    #[test]
    fn the_peer_check_finds_the_clients_socket_and_its_process() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let table = std::fs::read_to_string("/proc/self/net/tcp").unwrap();
        let peer = accepted.peer_addr().unwrap();
        let local = accepted.local_addr().unwrap();
        let inode = peer::socket_inode(&table, peer, local).expect("the client's socket");
        // This process holds it, and nothing else does.
        assert_eq!(peer::holders_of(inode), [std::process::id()]);
        peer::check(&accepted).unwrap();
        assert_eq!(peer::socket_inode(&table, local, local), None);
        assert_eq!(
            peer::proc_address("127.0.0.1:8080".parse().unwrap()),
            format!("{:08X}:1F90", u32::from_ne_bytes([127, 0, 0, 1]))
        );
        drop(client);
    }
}
