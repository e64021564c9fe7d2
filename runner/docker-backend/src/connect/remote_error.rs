//! Why an engine reached through the relay (`remote.rs`) cannot be used: its URL, its TLS
//! files, a dial, the first ping or the relay's own socket. Each message names the file, the
//! address or the program, as the user gave them; key material is never quoted.

use std::fmt;
use std::path::PathBuf;

use crate::connect::remote::DIAL_TIMEOUT;

/// An `ssh://` engine URL that cannot be dialed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshUrlError {
    /// The URL does not start with `ssh://`.
    #[error("{0} is not an ssh:// URL")]
    NotSsh(String),
    /// The URL has a path after the host.
    #[error("{0}: an ssh:// engine is ssh://[user@]host[:port], without a path")]
    HasPath(String),
    /// The port is not a number from 0 to 65535.
    #[error("{url}: the port must be a number")]
    BadPort {
        /// The URL.
        url: String,
        /// Why the port does not parse.
        #[source]
        source: std::num::ParseIntError,
    },
    /// The user or host is empty, starts with `-` (ssh would read an option) or holds other
    /// characters than letters, digits and `._-`.
    #[error("{0}: the user and host must be plain names or addresses")]
    NotPlain(String),
}

/// TLS files or a host name a TLS engine cannot be verified with; found when its dialer is
/// made, before any connection.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The URL's host is neither a DNS name nor an IP address.
    #[error("{host} is not a host name or address TLS can verify")]
    ServerName {
        /// The host.
        host: String,
        /// Why rustls refuses it.
        #[source]
        source: rustls_pki_types::InvalidDnsNameError,
    },
    /// A certificate file cannot be read (missing, unreadable).
    #[error("cannot read {}: {source}", path.display())]
    ReadCertificates {
        /// The file.
        path: PathBuf,
        /// The reader's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate file is not PEM.
    #[error("{} is not a PEM certificate file: {source}", path.display())]
    NotPem {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate file holds no certificate.
    #[error("{} holds no certificate", .0.display())]
    NoCertificate(PathBuf),
    /// The CA file's certificate cannot be a root.
    #[error("{}: not a usable CA certificate: {source}", path.display())]
    BadCa {
        /// The CA file.
        path: PathBuf,
        /// rustls's reason.
        #[source]
        source: tokio_rustls::rustls::Error,
    },
    /// The crypto provider offers no safe protocol version.
    #[error("{0}")]
    Protocols(#[source] tokio_rustls::rustls::Error),
    /// The client key file is not a PEM private key (the parser's message is left out: it
    /// could quote the key).
    #[error("{} is not a readable PEM private key (PKCS#8, PKCS#1 or SEC1)", .0.display())]
    BadKey(PathBuf),
    /// The client certificate and key do not go together, or rustls refuses them.
    #[error(
        "{} and {} are not a usable client certificate and key: {source}",
        cert.display(),
        key.display()
    )]
    BadClientIdentity {
        /// The client certificate file.
        cert: PathBuf,
        /// The client key file.
        key: PathBuf,
        /// rustls's reason.
        #[source]
        source: tokio_rustls::rustls::Error,
    },
}

/// Why an engine's URL or TLS files give no dialer.
#[derive(Debug, thiserror::Error)]
pub enum DialerError {
    /// The `ssh://` URL is malformed.
    #[error(transparent)]
    Ssh(#[from] SshUrlError),
    /// The TLS files or host cannot be used.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// One connection to the engine that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// No TCP connection within [`DIAL_TIMEOUT`].
    #[error("no answer from {0} within {DIAL_TIMEOUT:?}")]
    ConnectTimeout(String),
    /// The TCP connection was refused or failed.
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// `host:port`.
        address: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No TLS handshake within [`DIAL_TIMEOUT`].
    #[error("no TLS handshake with {0} within {DIAL_TIMEOUT:?}")]
    HandshakeTimeout(String),
    /// The TLS handshake failed (an unknown CA, a wrong name, a refused client certificate).
    #[error("the TLS handshake with {address} failed: {source}")]
    Handshake {
        /// `host:port`.
        address: String,
        /// The TLS error.
        #[source]
        source: std::io::Error,
    },
    /// The ssh program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program (`ssh` or `RUNNER_SSH_COMMAND`'s first word).
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The ssh program started without its stdin or stdout pipe.
    #[error("{0} started without its pipes")]
    NoPipes(String),
}

/// Why the engine's `/_ping` through a fresh dial got no good answer.
#[derive(Debug, thiserror::Error)]
pub enum PingError {
    /// No answer within [`DIAL_TIMEOUT`].
    #[error("no answer to a ping within {DIAL_TIMEOUT:?}")]
    Timeout,
    /// Writing the ping or reading its answer failed.
    #[error("the ping failed: {0}")]
    Io(#[source] std::io::Error),
    /// The connection closed before a status line.
    #[error("the connection closed without an answer")]
    Closed,
    /// The engine answered with another status than 200.
    #[error("the engine answered the ping with {0:?}")]
    Status(String),
}

/// What an ssh dialer's child said on stderr when a ping failed (nothing for TLS).
#[derive(Debug)]
pub enum SshStderr {
    /// A TLS dialer: no child, nothing to add.
    NotSsh,
    /// The child said nothing; its program is named.
    Silent(String),
    /// What the child said, lines joined with `; `.
    Said(String),
}

/// An engine that cannot be reached through its dialer, found before the job starts.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The dial itself failed.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The dial worked, the ping did not; ssh's own words say why more often than the ping.
    #[error("{failure}{ssh}")]
    Ping {
        /// What went wrong with the ping.
        #[source]
        failure: PingError,
        /// What the ssh child said.
        ssh: SshStderr,
    },
}

impl fmt::Display for SshStderr {
    /// The suffix of a ping's failure: `; ssh said: …`, ` (ssh said nothing)`, or nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SshStderr::NotSsh => Ok(()),
            SshStderr::Silent(program) => write!(f, " ({program} said nothing)"),
            SshStderr::Said(said) => write!(f, "; ssh said: {said}"),
        }
    }
}

/// The relay's private socket that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EngineRelayError {
    /// The temporary directory could not be made.
    #[error("cannot make the engine relay's directory: {0}")]
    Directory(#[source] std::io::Error),
    /// The directory could not be made private (mode 0700).
    #[error("cannot make the engine relay's directory private: {0}")]
    Private(#[source] std::io::Error),
    /// The socket could not be bound.
    #[error("cannot listen on the engine relay's socket: {0}")]
    Listen(#[source] std::io::Error),
}
