//! Who may talk to the server: every request (HTTP and the WebSocket upgrade alike) passes
//! [`Access::check`] before any route sees it.
//!
//! - `Host` must name the server: a loopback name (`localhost`, a loopback address), the
//!   address it is bound to, or a name given with `--allowed-host`. A web page that points
//!   its own name at this machine (DNS rebinding) sends its own name as `Host`, and is
//!   refused.
//! - A request with an `Origin` (every browser sends one on a WebSocket handshake and on a
//!   cross-site request; `openenv-core`'s client sends none) is refused unless the origin was
//!   allowed with `--allowed-origin`: a page the operator visits cannot drive the server.
//! - With a credential, every request must carry it: HTTP Basic with the credential as the
//!   password (the form the published client sends unchanged: user-info in its base URL,
//!   `http://runner:TOKEN@host:port`, which its WebSocket library turns into Basic auth), or
//!   `Authorization: Bearer TOKEN`. Compared in constant time.

use std::net::IpAddr;

use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use base64::Engine as _;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `Host`, or one that is not a served name.
    #[error(
        "Host {0:?} is not a name this server answers to; start it with --allowed-host NAME to add one"
    )]
    Host(String),
    /// An `Origin` that was not allowed.
    #[error(
        "requests from web pages (Origin {0:?}) are refused; start the server with --allowed-origin ORIGIN to allow one"
    )]
    Origin(String),
    /// No credential, or a wrong one.
    #[error(
        "this server needs its credential: put it in the URL (http://runner:CREDENTIAL@host:port) or send Authorization: Bearer CREDENTIAL"
    )]
    Credential,
}

/// The server's rules for strangers.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Names `Host` may carry (lowercase, no port, no brackets, no trailing dot).
    hosts: Vec<String>,
    /// Origins allowed to send requests (lowercase, no trailing `/`).
    origins: Vec<String>,
    /// The credential every request must carry, when there is one.
    token: Option<String>,
}

impl Access {
    /// The rules of a server bound to `bound`: loopback names and `bound` itself (unless it
    /// is the unspecified address), plus `extra_hosts`; `origins` allowed; `token` required
    /// when given.
    pub fn new(
        bound: IpAddr,
        extra_hosts: &[String],
        origins: &[String],
        token: Option<String>,
    ) -> Self {
        let mut hosts: Vec<String> = vec!["localhost".into()];
        if !bound.is_unspecified() {
            hosts.push(bound.to_string());
        }
        hosts.extend(extra_hosts.iter().map(|h| normalise_host(h)));
        Self {
            hosts,
            origins: origins.iter().map(|o| normalise_origin(o)).collect(),
            token,
        }
    }

    /// True when requests must carry the credential.
    pub fn requires_credential(&self) -> bool {
        self.token.is_some()
    }

    /// Checks one request's headers: its `Host`, its `Origin` and its credential, in this
    /// order (a stranger learns nothing about the credential).
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !self.host_allowed(host) {
            return Err(Refusal::Host(host.chars().take(200).collect()));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes()).into_owned();
            if !self.origins.contains(&normalise_origin(&origin)) {
                return Err(Refusal::Origin(origin.chars().take(200).collect()));
            }
        }
        match &self.token {
            None => Ok(()),
            Some(token) => {
                let given = headers
                    .get_all(AUTHORIZATION)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .filter_map(presented_credential);
                let mut ok = false;
                for candidate in given {
                    ok |= constant_time_eq(candidate.as_bytes(), token.as_bytes());
                }
                if ok { Ok(()) } else { Err(Refusal::Credential) }
            }
        }
    }

    fn host_allowed(&self, header: &str) -> bool {
        let name = normalise_host(strip_port(header));
        if name.is_empty() {
            return false;
        }
        if name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
            return true;
        }
        self.hosts.contains(&name)
    }
}

/// The host of a `Host` header without its port (`[::1]:8000` → `[::1]`).
fn strip_port(header: &str) -> &str {
    let header = header.trim();
    if header.starts_with('[') {
        return match header.find(']') {
            Some(end) => &header[..=end],
            None => header,
        };
    }
    match header.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => header,
    }
}

/// A host name as compared: lowercase, without brackets or a trailing dot.
fn normalise_host(host: &str) -> String {
    let host = host.trim();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// An origin as compared: lowercase, without a trailing `/`.
fn normalise_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// The credential an `Authorization` value presents: Basic's password (any user name) or
/// Bearer's token.
fn presented_credential(value: &str) -> Option<String> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.to_owned());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (_, password) = text.split_once(':')?;
        // A client that percent-encoded the user-info sends it as it was written.
        return Some(password.to_owned());
    }
    None
}

/// Equal bytes, in a time that depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh credential: 32 random bytes, hex (URL-safe as user-info, nothing to encode).
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn basic(user: &str, password: &str) -> String {
        let raw = format!("{user}:{password}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    #[test]
    fn loopback_names_and_the_bound_address_are_served_others_refused() {
        let access = Access::new("10.1.2.3".parse().unwrap(), &["Box.Lan.".into()], &[], None);
        for host in [
            "localhost:8000",
            "LOCALHOST",
            "127.0.0.1:1",
            "127.0.0.2:80",
            "[::1]:8000",
            "10.1.2.3:8000",
            "box.lan:9",
        ] {
            assert_eq!(access.check(&headers(&[("host", host)])), Ok(()), "{host}");
        }
        for host in [
            "evil.example:8000",
            "evil.example",
            "localhost.evil.example",
            "10.1.2.4",
            "",
        ] {
            assert!(
                matches!(
                    access.check(&headers(&[("host", host)])),
                    Err(Refusal::Host(_))
                ),
                "{host}"
            );
        }
        assert!(matches!(
            access.check(&HeaderMap::new()),
            Err(Refusal::Host(_))
        ));
    }

    #[test]
    fn an_unspecified_bind_serves_only_loopback_names_and_the_ones_given() {
        let access = Access::new("0.0.0.0".parse().unwrap(), &[], &[], None);
        assert!(access.check(&headers(&[("host", "0.0.0.0:8000")])).is_err());
        assert!(
            access
                .check(&headers(&[("host", "127.0.0.1:8000")]))
                .is_ok()
        );
    }

    #[test]
    fn a_browser_origin_is_refused_unless_allowed() {
        let access = Access::new(
            "127.0.0.1".parse().unwrap(),
            &[],
            &["http://Trainer.test:3000/".into()],
            None,
        );
        let evil = headers(&[
            ("host", "127.0.0.1:8000"),
            ("origin", "http://evil.example"),
        ]);
        assert_eq!(
            access.check(&evil),
            Err(Refusal::Origin("http://evil.example".into()))
        );
        let null = headers(&[("host", "127.0.0.1:8000"), ("origin", "null")]);
        assert!(access.check(&null).is_err());
        let allowed = headers(&[
            ("host", "127.0.0.1"),
            ("origin", "http://trainer.test:3000"),
        ]);
        assert_eq!(access.check(&allowed), Ok(()));
    }

    #[test]
    fn the_credential_comes_as_basic_or_bearer() {
        let access = Access::new("0.0.0.0".parse().unwrap(), &[], &[], Some("s3cret".into()));
        let host = ("host", "127.0.0.1:8000");
        assert_eq!(access.check(&headers(&[host])), Err(Refusal::Credential));
        for good in [
            basic("runner", "s3cret"),
            basic("", "s3cret"),
            "Bearer s3cret".into(),
        ] {
            assert_eq!(
                access.check(&headers(&[host, ("authorization", &good)])),
                Ok(()),
                "{good}"
            );
        }
        for bad in [
            basic("runner", "s3cre"),
            basic("s3cret", ""),
            "Bearer s3cret2".into(),
            "Basic !!!".into(),
            "s3cret".into(),
        ] {
            assert_eq!(
                access.check(&headers(&[host, ("authorization", &bad)])),
                Err(Refusal::Credential),
                "{bad}"
            );
        }
        // The Host is judged first: a stranger's page learns nothing of the credential.
        let stranger = headers(&[("host", "evil.example"), ("authorization", "Bearer s3cret")]);
        assert!(matches!(access.check(&stranger), Err(Refusal::Host(_))));
    }

    #[test]
    fn generated_credentials_are_long_and_fresh() {
        let a = generate_token().unwrap();
        assert_eq!(a.len(), 64);
        assert_ne!(a, generate_token().unwrap());
    }
}
