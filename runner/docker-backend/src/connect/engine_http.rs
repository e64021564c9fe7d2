//! A plain HTTP request to the engine, for the one call bollard cannot make as we need it:
//! a BuildKit build (`POST /build?version=2`) answers with BuildKit status messages that
//! bollard without its `buildkit` feature cannot decode (its stream ends at the first one),
//! and that feature costs a gRPC stack (see `image/buildkit.rs`). The request goes to the same
//! engine bollard talks to: `DOCKER_HOST` (`unix://` or plain `tcp://`) or the default socket,
//! or the pool's engine URL (see `mod.rs`).

use std::path::PathBuf;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The engine's default socket, as the Docker client and bollard use it.
const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// Where the engine listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket.
    Unix(PathBuf),
    /// `host:port` over plain HTTP.
    Tcp(String),
}

/// A `DOCKER_HOST` image builds cannot reach: TLS, ssh or another scheme than `unix://` and
/// plain `tcp://` (said when a build needs the engine, not at connection).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "DOCKER_HOST={host}{}: image builds need the engine on a unix:// socket or plain tcp://",
    if *.tls { " with DOCKER_TLS_VERIFY" } else { "" }
)]
pub struct EndpointError {
    /// The `DOCKER_HOST` value.
    host: String,
    /// Whether `DOCKER_TLS_VERIFY` asked for TLS.
    tls: bool,
}

impl Endpoint {
    /// The endpoint `DOCKER_HOST` names (the default socket when it is unset). TLS and SSH
    /// endpoints are refused by name: builds go through a Unix socket or plain TCP.
    pub fn from_env() -> Result<Endpoint, EndpointError> {
        let host = std::env::var("DOCKER_HOST").unwrap_or_default();
        let tls = std::env::var("DOCKER_TLS_VERIFY").is_ok_and(|v| !v.is_empty());
        Endpoint::parse(&host, tls)
    }

    pub(crate) fn parse(host: &str, tls: bool) -> Result<Endpoint, EndpointError> {
        if host.is_empty() {
            return Ok(Endpoint::Unix(DEFAULT_SOCKET.into()));
        }
        if let Some(path) = host.strip_prefix("unix://") {
            return Ok(Endpoint::Unix(path.into()));
        }
        let plain = host
            .strip_prefix("tcp://")
            .or_else(|| host.strip_prefix("http://"));
        match plain {
            Some(address) if !tls => Ok(Endpoint::Tcp(address.trim_end_matches('/').to_owned())),
            _ => Err(EndpointError {
                host: host.to_owned(),
                tls,
            }),
        }
    }

    /// Sends `POST path_and_query` with `body` of `content_type` and returns the response as
    /// soon as its headers arrive (the body streams).
    pub async fn post(
        &self,
        path_and_query: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<Response<Incoming>, EngineRequestError> {
        let body = Full::new(body);
        let builder = Request::post(match self {
            Endpoint::Unix(socket) => {
                hyper::Uri::from(hyperlocal::Uri::new(socket, path_and_query))
            }
            Endpoint::Tcp(address) => format!("http://{address}{path_and_query}")
                .parse()
                .map_err(|source| EngineRequestError::Address {
                    address: address.clone(),
                    source,
                })?,
        })
        .header("Content-Type", content_type);
        let request = builder.body(body).map_err(EngineRequestError::Request)?;
        let sent = match self {
            Endpoint::Unix(_) => {
                Client::builder(TokioExecutor::new())
                    .build::<_, Full<Bytes>>(hyperlocal::UnixConnector)
                    .request(request)
                    .await
            }
            Endpoint::Tcp(_) => {
                Client::builder(TokioExecutor::new())
                    .build::<_, Full<Bytes>>(HttpConnector::new())
                    .request(request)
                    .await
            }
        };
        sent.map_err(|source| EngineRequestError::Unreachable {
            endpoint: self.clone(),
            source,
        })
    }
}

/// Why a request to the engine got no response.
#[derive(Debug, thiserror::Error)]
pub enum EngineRequestError {
    /// A `tcp://` address that does not make a URL.
    #[error("bad engine address {address}: {source}")]
    Address {
        /// The `host:port` given.
        address: String,
        /// Why it is not a URL.
        source: hyper::http::uri::InvalidUri,
    },
    /// The request could not be built (a header the HTTP library refuses).
    #[error("{0}")]
    Request(#[source] hyper::http::Error),
    /// The engine could not be reached, or closed the connection before answering.
    #[error("cannot reach the engine at {endpoint:?}: {source}")]
    Unreachable {
        /// Where the request went.
        endpoint: Endpoint,
        /// The client's error (its own sources say which connect or read failed).
        source: hyper_util::client::legacy::Error,
    },
}

/// Reads at most `max` bytes of a (non-streaming) response body, as text.
pub async fn read_text(response: Response<Incoming>, max: usize) -> String {
    let mut body = response.into_body();
    let mut out = Vec::new();
    while out.len() < max {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            _ => break,
        }
    }
    out.truncate(max);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_host_forms() {
        assert_eq!(
            Endpoint::parse("", false),
            Ok(Endpoint::Unix(DEFAULT_SOCKET.into()))
        );
        assert_eq!(
            Endpoint::parse("unix:///run/user/1000/docker.sock", false),
            Ok(Endpoint::Unix("/run/user/1000/docker.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:2375", false),
            Ok(Endpoint::Tcp("127.0.0.1:2375".into()))
        );
        let tls = Endpoint::parse("tcp://127.0.0.1:2376", true)
            .unwrap_err()
            .to_string();
        assert!(tls.contains("DOCKER_TLS_VERIFY"), "{tls}");
        let ssh = Endpoint::parse("ssh://me@127.0.0.1", false)
            .unwrap_err()
            .to_string();
        assert!(ssh.contains("ssh://"), "{ssh}");
    }
}
