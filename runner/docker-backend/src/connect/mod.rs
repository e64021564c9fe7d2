//! The connection to one Docker engine: the default one (`DOCKER_HOST`, else the default
//! socket), or an engine of a pool named by URL (`--docker-host`).

pub(crate) mod context;
pub(crate) mod engine_http;
pub(crate) mod remote;
pub(crate) mod remote_error;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bollard::{API_DEFAULT_VERSION, Docker};

use crate::connect::engine_http::{Endpoint, EndpointError};
use crate::connect::remote::{Dialer, Relay, SshTarget, TlsFiles};
use crate::connect::remote_error::{DialerError, SshUrlError};
use crate::error::DockerError;
use crate::error::{ConnectCause, DockerHostUnreachable};
use secrets::redact_url_credentials as redact;

/// An engine URL (`--docker-host`, `DOCKER_HOST`, a context's host) this runner cannot use;
/// every message starts with `engine <the text given>`, its user-info redacted
/// ([`secrets::redact_url_credentials`]): a refusal must not print the password it refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineUrlError {
    /// The text after `#` is not `n=N` with N at least 1.
    #[error(
        "engine {0}: the cap after '#' must be n=N with N at least 1 (as in unix:///run/docker.sock#n=8)"
    )]
    BadCap(String),
    /// A malformed `ssh://` URL.
    #[error("engine {text}: {source}")]
    Ssh {
        /// The text given.
        text: String,
        /// What is wrong with it.
        #[source]
        source: SshUrlError,
    },
    /// An `https://` URL: TLS engines are given as `tcp://` with the Docker CLI's variables.
    #[error(
        "engine {0}: give a TLS engine as tcp://host:port with DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH set (as for the Docker CLI), or as --docker-context NAME"
    )]
    Https(String),
    /// Another scheme than `unix://`, `tcp://` and `ssh://` (a bare path among them).
    #[error(
        "engine {0}: not an engine URL this runner can use; give unix:///path/to/docker.sock, tcp://host:port (TLS with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH) or ssh://[user@]host[:port]"
    )]
    Scheme(String),
    /// A `unix://` or `tcp://` URL with a user name or password: the engine API has no use for
    /// one (the Docker CLI's `tcp://` takes none either), and it would end up in messages.
    #[error(
        "engine {0}: a unix:// or tcp:// engine takes no user name or password; for a TLS engine set DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, for ssh give ssh://user@host"
    )]
    UserInfo(String),
    /// `unix://` or `tcp://` with nothing after it.
    #[error("engine {0}: the URL names no socket or host")]
    Empty(String),
}

/// bollard's request timeout bounds only the time to response headers; long operations
/// carry their own deadlines. Uploads of big trees need the headroom.
const REQUEST_TIMEOUT_SECS: u64 = 600;

/// An engine named by URL, with the user's optional cap on its trials: `unix:///path`,
/// `tcp://host:port` (TLS when `DOCKER_TLS_VERIFY` is set, with the files of
/// `DOCKER_CERT_PATH`, as the Docker CLI), `ssh://[user@]host[:port]`, each optionally
/// followed by `#n=8`; or the engine of a Docker CLI context (see `context.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineUrl {
    /// The URL without the cap.
    pub url: String,
    /// `#n=N`: at most N trials at once on this engine.
    pub max_trials: Option<usize>,
    /// The TLS files of a `tcp://` engine spoken to over TLS; `None` for plain HTTP.
    pub tls: Option<TlsFiles>,
    /// The Docker CLI context the engine came from, for messages.
    pub context: Option<String>,
}

impl EngineUrl {
    /// Parses `URL[#n=N]`, `tcp://` engines taking TLS from `DOCKER_TLS_VERIFY` and
    /// `DOCKER_CERT_PATH` (default `~/.docker`), which therefore apply to every `tcp://` engine
    /// given by URL (engines with certificates of their own are given by context).
    pub fn parse(text: &str) -> Result<EngineUrl, EngineUrlError> {
        Self::parse_with(text, tls_dir_from_env().as_deref())
    }

    /// [`EngineUrl::parse`] with `tls_dir` the certificate directory of TLS `tcp://` engines
    /// (`None`: plain HTTP).
    pub fn parse_with(text: &str, tls_dir: Option<&Path>) -> Result<EngineUrl, EngineUrlError> {
        let (url, cap) = match text.split_once('#') {
            Some((url, cap)) => (url, Some(cap)),
            None => (text, None),
        };
        let max_trials = match cap {
            None => None,
            Some(cap) => {
                let n = cap
                    .strip_prefix("n=")
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| *n > 0);
                Some(n.ok_or_else(|| EngineUrlError::BadCap(redact(text)))?)
            }
        };
        let engine = |tls| EngineUrl {
            url: url.to_owned(),
            max_trials,
            tls,
            context: None,
        };
        if url.starts_with("ssh://") {
            SshTarget::parse(url).map_err(|source| EngineUrlError::Ssh {
                text: redact(text),
                source,
            })?;
            return Ok(engine(None));
        }
        if url.starts_with("https://") {
            return Err(EngineUrlError::Https(redact(text)));
        }
        if !url.starts_with("unix://") && secrets::has_url_credentials(url) {
            return Err(EngineUrlError::UserInfo(redact(text)));
        }
        // The endpoint's own error speaks of DOCKER_HOST, which this URL may not be.
        Endpoint::parse(url, false).map_err(|_| EngineUrlError::Scheme(redact(text)))?;
        if url == "unix://" || url == "tcp://" {
            return Err(EngineUrlError::Empty(redact(text)));
        }
        let tls = url
            .starts_with("tcp://")
            .then_some(tls_dir)
            .flatten()
            .map(TlsFiles::in_dir);
        Ok(engine(tls))
    }

    /// How records and messages name the engine: the URL without its user-info
    /// (`ssh://host:port`), so no credential is ever shown.
    pub fn name(&self) -> String {
        let redacted = redact(&self.url);
        redacted.replacen(&format!("://{}@", secrets::REDACTED_USERINFO), "://", 1)
    }

    /// The dialer of an engine reached through the relay (TLS or ssh); `None` for a socket
    /// or plain HTTP, which bollard reaches itself.
    fn dialer(&self) -> Result<Option<Dialer>, DialerError> {
        if let Some(files) = &self.tls {
            return Ok(Some(Dialer::tls(&self.url, files)?));
        }
        if self.url.starts_with("ssh://") {
            return Ok(Some(Dialer::ssh(&SshTarget::parse(&self.url)?)));
        }
        Ok(None)
    }
}

/// Refuses a `DOCKER_HOST` other than `ssh://` (whose URL is parsed, and refused redacted, as
/// a pool engine's) that carries user-info, before bollard sees it: its errors would quote the
/// password.
fn refuse_docker_host_credentials(host: &str) -> Result<(), DockerError> {
    if !host.starts_with("ssh://")
        && !host.starts_with("unix://")
        && secrets::has_url_credentials(host)
    {
        return Err(DockerError::Connect(
            EngineUrlError::UserInfo(format!("DOCKER_HOST={}", redact(host))).into(),
        ));
    }
    Ok(())
}

/// The certificate directory of TLS `tcp://` engines, as the Docker CLI finds it: set when
/// `DOCKER_TLS_VERIFY` is not empty, `DOCKER_CERT_PATH` or else `~/.docker`.
fn tls_dir_from_env() -> Option<PathBuf> {
    std::env::var_os("DOCKER_TLS_VERIFY").filter(|v| !v.is_empty())?;
    std::env::var_os("DOCKER_CERT_PATH")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))
}

/// A connected Docker engine.
#[derive(Clone)]
pub struct DockerClient {
    docker: Docker,
    /// Where image builds are sent (the same engine, over plain HTTP), or why builds cannot
    /// reach it (said when a build needs it).
    endpoint: Result<Endpoint, EndpointError>,
    /// Set once the engine refused a writable-layer quota (`--storage-opt size`): its storage
    /// driver cannot enforce one, so later containers are created without asking again (every
    /// trial has a storage limit, so asking each time would double every create).
    quota_refused: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The relay a TLS or ssh engine is reached through, kept while any clone of the client
    /// lives (see `remote.rs`).
    _relay: Option<Arc<Relay>>,
}

impl DockerClient {
    /// Connects through `DOCKER_HOST` or the default socket and checks the engine answers.
    /// A `DOCKER_HOST` naming an ssh:// engine, or a tcp:// one with `DOCKER_TLS_VERIFY` set,
    /// is reached as a pool's engine is (bollard's own transports for these are features this
    /// build leaves out, and builds need the same transport).
    pub async fn connect() -> Result<DockerClient, DockerError> {
        let host = std::env::var("DOCKER_HOST").unwrap_or_default();
        refuse_docker_host_credentials(&host)?;
        if host.starts_with("ssh://")
            || (host.starts_with("tcp://") && tls_dir_from_env().is_some())
        {
            let engine = EngineUrl::parse(&host).map_err(|e| DockerError::Connect(e.into()))?;
            return Self::connect_to(&engine).await.map_err(|e| match e {
                DockerError::EngineUnreachable(source) => {
                    DockerError::Connect(Box::new(DockerHostUnreachable {
                        host: redact(&host),
                        source,
                    }))
                }
                other => other,
            });
        }
        let docker = Docker::connect_with_defaults().map_err(|e| DockerError::Connect(e.into()))?;
        // A DOCKER_HOST builds cannot use is refused when a build needs it, not here: a
        // job of prebuilt images runs on any engine bollard reaches.
        Self::checked(docker, Endpoint::from_env()).await
    }

    /// Connects to the engine `engine` names and checks it answers.
    /// A TLS or ssh engine is first dialed and pinged directly, so that one that cannot be
    /// reached is refused with the TLS error or ssh's own words.
    pub async fn connect_to(engine: &EngineUrl) -> Result<DockerClient, DockerError> {
        fn named(e: impl Into<ConnectCause>) -> DockerError {
            DockerError::EngineUnreachable(e.into())
        }
        // The ping's own error, without the default engine's DOCKER_HOST hint.
        let unreachable = |e: DockerError| match e {
            DockerError::Connect(reason) => DockerError::EngineUnreachable(reason),
            other => other,
        };
        let Some(dialer) = engine.dialer().map_err(named)? else {
            let docker = Docker::connect_with_host(&engine.url).map_err(named)?;
            return Self::checked(docker, Endpoint::parse(&engine.url, false))
                .await
                .map_err(unreachable);
        };
        dialer.probe().await.map_err(named)?;
        let relay = Relay::start(dialer).map_err(named)?;
        let socket = relay.socket();
        let docker = Docker::connect_with_unix(
            &format!("unix://{}", socket.display()),
            REQUEST_TIMEOUT_SECS,
            API_DEFAULT_VERSION,
        )
        .map_err(named)?;
        let mut client = Self::checked(docker, Ok(Endpoint::Unix(socket)))
            .await
            .map_err(unreachable)?;
        client._relay = Some(Arc::new(relay));
        Ok(client)
    }

    async fn checked(
        docker: Docker,
        endpoint: Result<Endpoint, EndpointError>,
    ) -> Result<DockerClient, DockerError> {
        let client = DockerClient {
            docker: docker.with_timeout(std::time::Duration::from_secs(REQUEST_TIMEOUT_SECS)),
            endpoint,
            quota_refused: Default::default(),
            _relay: None,
        };
        client.ping().await?;
        Ok(client)
    }

    /// Asks whether the engine answers.
    pub async fn ping(&self) -> Result<(), DockerError> {
        self.docker
            .ping()
            .await
            .map(|_| ())
            .map_err(|e| DockerError::Connect(e.into()))
    }

    /// Where builds go, or why they cannot.
    pub(crate) fn endpoint(&self) -> Result<Endpoint, EndpointError> {
        self.endpoint.clone()
    }

    /// True once the engine refused a storage quota (see the field).
    pub(crate) fn quota_refused(&self) -> bool {
        self.quota_refused
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Remembers that the engine refuses storage quotas.
    pub(crate) fn refuse_quotas(&self) {
        self.quota_refused
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The bollard handle.
    pub(crate) fn api(&self) -> &Docker {
        &self.docker
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39: a refusal of a URL with a password never prints the password, on the ssh,
    /// tcp and DOCKER_HOST paths; records name the engine without user-info.
    #[test]
    fn refusals_of_urls_with_passwords_do_not_echo_them() {
        for (given, shown) in [
            ("ssh://user:Ssh1Secret@host", "ssh://***@host"),
            (
                "ssh://user:Ssh1Secret@host:22/path",
                "ssh://***@host:22/path",
            ),
            ("ssh://user:Ssh1Secret@host#n=0", "ssh://***@host#n=0"),
            (
                "tcp://user:Tcp2Secret@10.0.0.5:2375",
                "tcp://***@10.0.0.5:2375",
            ),
            (
                "tcp://Tcp2Secret@10.0.0.5:2375#n=2",
                "tcp://***@10.0.0.5:2375#n=2",
            ),
            ("https://user:Tls3Secret@h:2376", "https://***@h:2376"),
        ] {
            let err = EngineUrl::parse_with(given, None).unwrap_err().to_string();
            assert!(!err.contains("Secret"), "{given}: {err}");
            assert!(err.contains(shown), "{given}: {err}");
        }
        let err = refuse_docker_host_credentials("tcp://user:Env4Secret@127.0.0.1:1")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("Env4Secret"), "{err}");
        assert!(err.contains("DOCKER_HOST=tcp://***@127.0.0.1:1"), "{err}");
        for fine in [
            "",
            "unix:///run/docker.sock",
            "tcp://127.0.0.1:2375",
            "ssh://me@h",
        ] {
            assert!(refuse_docker_host_credentials(fine).is_ok(), "{fine}");
        }
        let named = EngineUrl::parse_with("ssh://Tok5AsUser@h:22", None).unwrap();
        assert_eq!(named.name(), "ssh://h:22");
    }

    #[test]
    fn engine_urls_take_a_cap_and_refuse_what_the_pool_cannot_speak() {
        let plain = EngineUrl::parse("unix:///run/docker-b.sock").unwrap();
        assert_eq!(plain.url, "unix:///run/docker-b.sock");
        assert_eq!(plain.max_trials, None);
        let capped = EngineUrl::parse("tcp://127.0.0.1:2375#n=8").unwrap();
        assert_eq!(capped.name(), "tcp://127.0.0.1:2375");
        assert_eq!(capped.max_trials, Some(8));
        let ssh = EngineUrl::parse_with("ssh://me@build-1:2222#n=2", None).unwrap();
        assert_eq!(
            ssh.name(),
            "ssh://build-1:2222",
            "records carry no user name"
        );
        assert_eq!((ssh.max_trials, ssh.tls), (Some(2), None));
        let certs = Path::new("/certs");
        let tls = EngineUrl::parse_with("tcp://127.0.0.1:2376", Some(certs)).unwrap();
        assert_eq!(tls.tls.unwrap().ca, certs.join("ca.pem"));
        let socket = EngineUrl::parse_with("unix:///s", Some(certs)).unwrap();
        assert_eq!(socket.tls, None, "TLS is for tcp:// engines only");
        for bad in [
            "unix:///s#n=0",
            "unix:///s#8",
            "ssh://me@host/path",
            "https://h:2376",
            "tcp://",
            "/run/docker.sock",
        ] {
            let err = EngineUrl::parse_with(bad, None).unwrap_err().to_string();
            // Named as given, its user-info redacted (a user name may be a token).
            let shown = secrets::redact_url_credentials(bad);
            assert!(err.contains(&shown), "{err}");
        }
    }
}
