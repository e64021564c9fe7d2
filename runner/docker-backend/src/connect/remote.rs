//! Engines reached through more than a socket: `tcp://` with TLS (the Docker CLI's
//! `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH`, or a context's certificates) and `ssh://` (one
//! `ssh … docker system dial-stdio` per connection, as the Docker CLI does).
//!
//! Both go through a relay: a Unix socket in a private directory of this process (mode 0700,
//! so no other user can borrow the engine's credentials through it) whose every accepted
//! connection is piped to a fresh TLS connection or ssh child. bollard and the build path
//! (`engine_http`) then speak plain HTTP over a Unix socket as for a local engine: one
//! transport for all their calls, hijacked exec streams and BuildKit builds included, instead
//! of a TLS client and an ssh transport in each of the two HTTP stacks.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use secrets::redact_url_credentials as redact;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};
use tokio::process::{Child, Command};
use tokio::time::timeout;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use crate::connect::remote_error::{
    DialError, EngineRelayError, PingError, ProbeError, SshStderr, SshUrlError, TlsError,
};

/// How long one dial (TCP connect and TLS handshake) or the first ping (ssh's login included)
/// may take before the engine counts as not answering.
pub(crate) const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// The port of a TLS engine whose URL names none (the Docker CLI's default).
const TLS_PORT: u16 = 2376;

/// The TLS files of one engine, named as in `DOCKER_CERT_PATH` and a context's TLS directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `ca.pem`: the only CA the engine's certificate may chain to (as the Docker CLI's
    /// `--tlsverify`, the machine's own roots are not trusted for an engine).
    pub ca: PathBuf,
    /// `cert.pem` and `key.pem`, the client's identity, when the directory holds both.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    /// The files in `dir` (`ca.pem`, `cert.pem`, `key.pem`); a missing CA is reported when the
    /// engine is connected, naming the file.
    pub fn in_dir(dir: &Path) -> TlsFiles {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        TlsFiles {
            ca: dir.join("ca.pem"),
            client: (cert.exists() && key.exists()).then_some((cert, key)),
        }
    }
}

/// `ssh://[user@]host[:port]`, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl SshTarget {
    /// Parses an `ssh://` URL. A path, an empty host or one that ssh would read as an option
    /// is refused.
    pub fn parse(url: &str) -> Result<SshTarget, SshUrlError> {
        let rest = url
            .strip_prefix("ssh://")
            .ok_or_else(|| SshUrlError::NotSsh(redact(url)))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') {
            return Err(SshUrlError::HasPath(redact(url)));
        }
        let (user, host_port) = match rest.rsplit_once('@') {
            Some((user, host)) => (Some(user), host),
            None => (None, rest),
        };
        let (host, port) = match host_port.rsplit_once(':') {
            Some((host, port)) => {
                let port = port.parse::<u16>().map_err(|source| SshUrlError::BadPort {
                    url: redact(url),
                    source,
                })?;
                (host, Some(port))
            }
            None => (host_port, None),
        };
        let plain = |s: &str| {
            !s.is_empty()
                && !s.starts_with('-')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        };
        if !plain(host) || user.is_some_and(|u| !plain(u)) {
            return Err(SshUrlError::NotPlain(redact(url)));
        }
        Ok(SshTarget {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
        })
    }
}

/// What each connection to the engine starts.
pub(crate) enum Dialer {
    /// A TLS connection to `address` (`host:port`).
    Tls {
        address: String,
        server_name: ServerName<'static>,
        connector: TlsConnector,
    },
    /// `program args…`: ssh running `docker system dial-stdio` on the engine's host.
    Ssh { program: String, args: Vec<String> },
}

/// A byte stream both ways.
trait Duplex: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Duplex for T {}

/// One connection to the engine; for ssh, the child that carries it (killed when dropped).
struct Dialed {
    stream: Box<dyn Duplex>,
    child: Option<Child>,
}

/// A child's stdout and stdin as one stream whose shutdown closes stdin: tokio's own
/// shutdown of a `ChildStdin` leaves the pipe open, so `docker system dial-stdio` would never
/// learn that the client is done, and its connection (and ssh) would outlive the client's.
struct ChildPipes {
    stdout: tokio::process::ChildStdout,
    stdin: Option<tokio::process::ChildStdin>,
}

impl AsyncRead for ChildPipes {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stdout).poll_read(cx, buf)
    }
}

impl AsyncWrite for ChildPipes {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.stdin.as_mut() {
            Some(stdin) => std::pin::Pin::new(stdin).poll_write(cx, buf),
            None => std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.stdin.as_mut() {
            Some(stdin) => std::pin::Pin::new(stdin).poll_flush(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some(stdin) = self.stdin.as_mut() {
            std::task::ready!(std::pin::Pin::new(stdin).poll_flush(cx))?;
        }
        self.stdin = None;
        std::task::Poll::Ready(Ok(()))
    }
}

impl Dialer {
    /// A dialer for the TLS engine `tcp://host[:port]` with `files`, which are read and checked
    /// now (a missing or malformed file is refused naming it; key material is never quoted).
    pub fn tls(url: &str, files: &TlsFiles) -> Result<Dialer, TlsError> {
        let address = url
            .strip_prefix("tcp://")
            .unwrap_or(url)
            .trim_end_matches('/');
        let (host, address) = match address.rsplit_once(':') {
            Some((host, port)) if port.parse::<u16>().is_ok() => (host, address.to_owned()),
            _ => (address, format!("{address}:{TLS_PORT}")),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server_name =
            ServerName::try_from(host.to_owned()).map_err(|source| TlsError::ServerName {
                host: host.to_owned(),
                source,
            })?;
        Ok(Dialer::Tls {
            address,
            server_name,
            connector: TlsConnector::from(Arc::new(tls_config(files)?)),
        })
    }

    /// A dialer for `target`: `ssh [-l user] [-p port] -- host docker system dial-stdio`, the
    /// program and its leading options from `RUNNER_SSH_COMMAND` when set (as `GIT_SSH_COMMAND`:
    /// e.g. `ssh -F /path/to/config`), else `ssh` with the user's own ssh configuration.
    /// `BatchMode` keeps ssh from asking for a password or passphrase nobody could type.
    pub fn ssh(target: &SshTarget) -> Dialer {
        let command = std::env::var("RUNNER_SSH_COMMAND").unwrap_or_default();
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words.next().unwrap_or_else(|| "ssh".to_owned());
        let mut args: Vec<String> = words.collect();
        for option in ["BatchMode=yes", "ConnectTimeout=30"] {
            args.extend(["-o".to_owned(), option.to_owned()]);
        }
        if let Some(user) = &target.user {
            args.extend(["-l".to_owned(), user.clone()]);
        }
        if let Some(port) = target.port {
            args.extend(["-p".to_owned(), port.to_string()]);
        }
        args.push("--".to_owned());
        args.push(target.host.clone());
        args.extend(["docker", "system", "dial-stdio"].map(str::to_owned));
        Dialer::Ssh { program, args }
    }

    async fn dial(&self, keep_stderr: bool) -> Result<Dialed, DialError> {
        match self {
            Dialer::Tls {
                address,
                server_name,
                connector,
            } => {
                let tcp = timeout(DIAL_TIMEOUT, TcpStream::connect(address))
                    .await
                    .map_err(|_| DialError::ConnectTimeout(address.clone()))?
                    .map_err(|source| DialError::Connect {
                        address: address.clone(),
                        source,
                    })?;
                let tls = timeout(DIAL_TIMEOUT, connector.connect(server_name.clone(), tcp))
                    .await
                    .map_err(|_| DialError::HandshakeTimeout(address.clone()))?
                    .map_err(|source| DialError::Handshake {
                        address: address.clone(),
                        source,
                    })?;
                Ok(Dialed {
                    stream: Box::new(tls),
                    child: None,
                })
            }
            Dialer::Ssh { program, args } => {
                let mut child = Command::new(program)
                    .args(args)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(if keep_stderr {
                        Stdio::piped()
                    } else {
                        Stdio::null()
                    })
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|source| DialError::Spawn {
                        program: program.clone(),
                        source,
                    })?;
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(DialError::NoPipes(program.clone()));
                };
                Ok(Dialed {
                    stream: Box::new(ChildPipes {
                        stdout,
                        stdin: Some(stdin),
                    }),
                    child: Some(child),
                })
            }
        }
    }

    /// Dials once and asks the engine's `/_ping`, so an engine that cannot be reached is
    /// refused before the job with the reason: the TLS error, or what ssh said on stderr
    /// (a refused key, an unknown host key, no `docker` on the remote host).
    pub async fn probe(&self) -> Result<(), ProbeError> {
        let mut dialed = self.dial(true).await?;
        let ask = async {
            dialed
                .stream
                .write_all(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n")
                .await?;
            dialed.stream.flush().await?;
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            // The status line is all the answer that matters.
            while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 4096 {
                let n = dialed.stream.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            Ok::<_, std::io::Error>(head)
        };
        let answer = match timeout(DIAL_TIMEOUT, ask).await {
            Err(_) => Err(PingError::Timeout),
            Ok(Err(e)) => Err(PingError::Io(e)),
            Ok(Ok(head)) => {
                let head = String::from_utf8_lossy(&head);
                let status = head.lines().next().unwrap_or_default().trim().to_owned();
                if status.starts_with("HTTP/1.") && status.contains(" 200") {
                    return Ok(());
                }
                Err(if status.is_empty() {
                    PingError::Closed
                } else {
                    PingError::Status(status)
                })
            }
        };
        let said = match dialed.child.as_mut() {
            Some(child) => ssh_stderr(child).await,
            None => String::new(),
        };
        answer.map_err(|failure| {
            let ssh = match (said.is_empty(), self) {
                (false, _) => SshStderr::Said(said),
                (true, Dialer::Ssh { program, .. }) => SshStderr::Silent(program.clone()),
                (true, Dialer::Tls { .. }) => SshStderr::NotSsh,
            };
            ProbeError::Ping { failure, ssh }
        })
    }
}

/// What a failed ssh child wrote on stderr (bounded): it is ended first, so a child that
/// still runs cannot hold the read open.
async fn ssh_stderr(child: &mut Child) -> String {
    let _ = child.start_kill();
    let Some(mut stderr) = child.stderr.take() else {
        return String::new();
    };
    let mut text = Vec::new();
    let _ = timeout(
        Duration::from_secs(5),
        (&mut stderr).take(8192).read_to_end(&mut text),
    )
    .await;
    String::from_utf8_lossy(&text).trim().replace('\n', "; ")
}

/// The client configuration of `files`: their CA as the only root, their client certificate.
fn tls_config(files: &TlsFiles) -> Result<ClientConfig, TlsError> {
    let certs = |path: &Path| -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|source| TlsError::ReadCertificates {
                path: path.to_owned(),
                source,
            })?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TlsError::NotPem {
                path: path.to_owned(),
                source,
            })?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate(path.to_owned()));
        }
        Ok(certs)
    };
    let mut roots = RootCertStore::empty();
    for ca in certs(&files.ca)? {
        roots.add(ca).map_err(|source| TlsError::BadCa {
            path: files.ca.clone(),
            source,
        })?;
    }
    let builder = ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(TlsError::Protocols)?
    .with_root_certificates(roots);
    match &files.client {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = certs(cert)?;
            // Not the parser's message: it could quote the file, and this one is a secret.
            let key_der =
                PrivateKeyDer::from_pem_file(key).map_err(|_| TlsError::BadKey(key.clone()))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|source| TlsError::BadClientIdentity {
                    cert: cert.clone(),
                    key: key.clone(),
                    source,
                })
        }
    }
}

/// A Unix socket in a private directory whose every connection is piped to the engine through
/// a fresh dial; stopped (and its directory removed) when dropped.
pub(crate) struct Relay {
    dir: tempfile::TempDir,
    accept: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Binds the socket and starts accepting on the current runtime.
    pub fn start(dialer: Dialer) -> Result<Relay, EngineRelayError> {
        let dir = tempfile::Builder::new()
            .prefix("runner-engine-")
            .tempdir()
            .map_err(EngineRelayError::Directory)?;
        // Private before the socket exists: whoever can connect to it uses the engine with
        // this process's TLS identity or ssh key.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(EngineRelayError::Private)?;
        let listener =
            UnixListener::bind(dir.path().join("docker.sock")).map_err(EngineRelayError::Listen)?;
        let dialer = Arc::new(dialer);
        let accept = tokio::spawn(async move {
            loop {
                let mut local = match listener.accept().await {
                    Ok((local, _)) => local,
                    // Out of descriptors and the like: a moment later may succeed, and the
                    // clients waiting meanwhile time out as for an engine that does not answer.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let dialer = dialer.clone();
                tokio::spawn(async move {
                    // A failed dial drops `local`: the client sees the engine hang up, as it
                    // would for a dead local socket, and the pool's probes take it from there.
                    if let Ok(mut remote) = dialer.dial(false).await {
                        let _ = tokio::io::copy_bidirectional(&mut local, &mut remote.stream).await;
                    }
                });
            }
        });
        Ok(Relay { dir, accept })
    }

    /// The socket's path.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("docker.sock")
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_urls_split_and_refuse_what_ssh_would_misread() {
        assert_eq!(
            SshTarget::parse("ssh://me@build-1:2222").unwrap(),
            SshTarget {
                user: Some("me".into()),
                host: "build-1".into(),
                port: Some(2222)
            }
        );
        assert_eq!(
            SshTarget::parse("ssh://127.0.0.1").unwrap(),
            SshTarget {
                user: None,
                host: "127.0.0.1".into(),
                port: None
            }
        );
        for bad in [
            "ssh://",
            "ssh://-oProxyCommand=x",
            "ssh://me@host/path",
            "ssh://host:port",
            "ssh://me x@host",
        ] {
            let err = SshTarget::parse(bad).unwrap_err().to_string();
            // Named as given, its user-info redacted (a user name may be a token).
            let shown = secrets::redact_url_credentials(bad);
            assert!(err.contains(&shown), "{err}");
        }
    }

    #[test]
    fn the_ssh_command_is_the_docker_clis_with_options_before_the_host() {
        let Dialer::Ssh { program, args } = Dialer::ssh(&SshTarget {
            user: Some("me".into()),
            host: "h".into(),
            port: Some(22),
        }) else {
            panic!("not ssh")
        };
        assert_eq!(program, "ssh");
        let tail: Vec<&str> = args.iter().map(String::as_str).rev().take(9).collect();
        assert_eq!(
            tail,
            [
                "dial-stdio",
                "system",
                "docker",
                "h",
                "--",
                "22",
                "-p",
                "me",
                "-l"
            ]
        );
        assert!(args.contains(&"BatchMode=yes".to_owned()), "{args:?}");
    }

    /// `cat` as the dialed program echoes what a client sends: the relay's plumbing (one
    /// child per connection, both directions, the client's end of input passed on) without an
    /// engine.
    #[tokio::test]
    async fn the_relay_pipes_each_connection_through_its_own_child_in_a_private_directory() {
        let relay = Relay::start(Dialer::Ssh {
            program: "cat".into(),
            args: Vec::new(),
        })
        .unwrap();
        let dir = relay.socket().parent().unwrap().to_owned();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o700,
            "only this user may use the engine through the relay"
        );
        for text in ["first connection", "second connection"] {
            let mut client = tokio::net::UnixStream::connect(relay.socket())
                .await
                .unwrap();
            client.write_all(text.as_bytes()).await.unwrap();
            client.shutdown().await.unwrap();
            let mut echoed = String::new();
            timeout(Duration::from_secs(10), client.read_to_string(&mut echoed))
                .await
                .expect("cat ends once the client's input ends")
                .unwrap();
            assert_eq!(echoed, text);
        }
        drop(relay);
        assert!(!dir.exists(), "the relay's directory goes with it");
    }

    #[test]
    fn tls_files_that_are_missing_or_not_pem_are_refused_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Dialer::tls("tcp://127.0.0.1:2376", &TlsFiles::in_dir(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(missing.contains("ca.pem"), "{missing}");
        std::fs::write(dir.path().join("ca.pem"), "not a certificate").unwrap();
        let garbage = Dialer::tls("tcp://127.0.0.1:2376", &TlsFiles::in_dir(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(
            garbage.contains("ca.pem") && garbage.contains("no certificate"),
            "{garbage}"
        );
    }
}
