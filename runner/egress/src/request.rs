//! The head of one proxy request: `CONNECT host:port`, or a plain HTTP request in absolute
//! form, rewritten to the origin form the destination expects.

/// Largest request head the proxy reads; a longer one is refused.
pub(crate) const MAX_HEAD_BYTES: usize = 16 * 1024;

/// What a client asked the proxy for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProxyRequest {
    /// `CONNECT`, `GET`, ...
    pub method: String,
    /// The destination host (a name or an IP literal, IPv6 without brackets).
    pub host: String,
    /// The destination port.
    pub port: u16,
    /// For plain HTTP, the head to send the destination (origin form, `Connection: close`);
    /// `None` for `CONNECT`, whose tunnel carries the client's bytes unchanged.
    pub forward_head: Option<Vec<u8>>,
}

/// Why the proxy cannot serve a request head; the message is the reason of its 400 answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
    /// The head's bytes are not UTF-8.
    #[error("the request head is not UTF-8")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// The first line is not `METHOD target version`.
    #[error("malformed request line {0:?}")]
    MalformedRequestLine(String),
    /// The version is not HTTP/1.x.
    #[error("unsupported protocol {0:?}")]
    UnsupportedProtocol(String),
    /// A plain request for an `https://` URL (TLS goes through a `CONNECT` tunnel).
    #[error("https:// URLs go through CONNECT")]
    HttpsWithoutConnect,
    /// A plain request whose target is not an absolute `http://` URL.
    #[error("a proxy request needs an absolute http:// URL, not {0:?}")]
    NotAbsoluteUrl(String),
    /// The URL carries `user:password@`, which the proxy does not pass on.
    #[error("credentials in the URL are not forwarded")]
    Credentials,
    /// A `[v6` address without its closing bracket.
    #[error("malformed address {0:?}")]
    MalformedAddress(String),
    /// The port is not a number from 1 to 65535.
    #[error("bad port in {0:?}")]
    BadPort(String),
    /// A `CONNECT` target without a port.
    #[error("CONNECT needs host:port, not {0:?}")]
    ConnectWithoutPort(String),
    /// The authority has a port but no host.
    #[error("no host in {0:?}")]
    NoHost(String),
    /// The `Host` header names another host than the request line (domain fronting on a
    /// shared address), or the request carries several.
    #[error("the Host header {header:?} does not name the request's host {target:?}")]
    HostMismatch {
        /// The `Host` header(s) as sent.
        header: String,
        /// The request line's authority.
        target: String,
    },
}

/// The end of the head (the index after `\r\n\r\n`), once `buffer` holds it.
pub(crate) fn head_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// Parses a complete head; `Err` is the reason for a 400 answer.
pub(crate) fn parse(head: &[u8]) -> Result<ProxyRequest, RequestError> {
    let text = std::str::from_utf8(head).map_err(RequestError::NotUtf8)?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(RequestError::MalformedRequestLine(request_line.to_owned()));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(RequestError::UnsupportedProtocol(version.to_owned()));
    }
    let lines: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target, None)?;
        check_host_header(&lines, target, &host, port, true)?;
        return Ok(ProxyRequest {
            method: "CONNECT".into(),
            host,
            port,
            forward_head: None,
        });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err(if target.starts_with("https://") {
            RequestError::HttpsWithoutConnect
        } else {
            RequestError::NotAbsoluteUrl(target.to_owned())
        });
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = split_authority(authority, Some(80))?;
    let has_host = check_host_header(&lines, authority, &host, port, false)?;
    let mut forward = format!("{method} {path} {version}\r\n");
    for line in lines {
        let name = line.split(':').next().unwrap_or_default().trim();
        // Hop-by-hop and proxy-only headers stop here; one request per connection.
        let dropped = [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ];
        if dropped.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            continue;
        }
        forward.push_str(line);
        forward.push_str("\r\n");
    }
    if !has_host {
        forward.push_str(&format!("Host: {authority}\r\n"));
    }
    forward.push_str("Connection: close\r\n\r\n");
    Ok(ProxyRequest {
        method: method.to_owned(),
        host,
        port,
        forward_head: Some(forward.into_bytes()),
    })
}

/// Checks the `Host` header against the request line's host and port (both normalised):
/// a plain request's `Host` without a port means 80; a `CONNECT`'s may leave the port out.
/// True when there is one. Several `Host` headers are a mismatch (which one would the
/// destination read?).
fn check_host_header(
    lines: &[&str],
    target: &str,
    host: &str,
    port: u16,
    connect: bool,
) -> Result<bool, RequestError> {
    let values: Vec<&str> = lines
        .iter()
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("host"))
        .map(|(_, value)| value.trim())
        .collect();
    let mismatch = || RequestError::HostMismatch {
        header: values.join(", "),
        target: target.to_owned(),
    };
    match values.as_slice() {
        [] => Ok(false),
        [value] => {
            let (named, named_port) = match split_authority(value, None) {
                Ok(parsed) => (parsed.0, Some(parsed.1)),
                Err(RequestError::ConnectWithoutPort(_)) => {
                    (split_authority(value, Some(80))?.0, None)
                }
                Err(_) => return Err(mismatch()),
            };
            let port_matches = match named_port {
                Some(named_port) => named_port == port,
                None => connect || port == 80,
            };
            if named == host && port_matches {
                Ok(true)
            } else {
                Err(mismatch())
            }
        }
        _ => Err(mismatch()),
    }
}

/// `host:port` (or `[v6]:port`), with `default_port` when the port is left out; the host
/// normalised (lower case, no trailing dot).
fn split_authority(
    authority: &str,
    default_port: Option<u16>,
) -> Result<(String, u16), RequestError> {
    if authority.contains('@') {
        return Err(RequestError::Credentials);
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| RequestError::MalformedAddress(authority.to_owned()))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match (port, default_port) {
        (Some(port), _) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| RequestError::BadPort(authority.to_owned()))?,
        (None, Some(default)) => default,
        (None, None) => return Err(RequestError::ConnectWithoutPort(authority.to_owned())),
    };
    let host = crate::allowlist::normalise_host(host);
    if host.is_empty() {
        return Err(RequestError::NoHost(authority.to_owned()));
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_form_requests_are_understood() {
        let connect =
            parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
        assert_eq!((connect.host.as_str(), connect.port), ("pypi.org", 443));
        assert!(connect.forward_head.is_none());
        let v6 = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 8443));
        let get = parse(
            b"GET http://Example.test:8080/a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!((get.host.as_str(), get.port), ("example.test", 8080));
        let head = String::from_utf8(get.forward_head.unwrap()).unwrap();
        assert_eq!(
            head,
            "GET /a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let bare = parse(b"GET http://example.test HTTP/1.0\r\n\r\n").unwrap();
        let head = String::from_utf8(bare.forward_head.unwrap()).unwrap();
        assert!(
            head.starts_with("GET / HTTP/1.0\r\nHost: example.test\r\n"),
            "{head}"
        );
    }

    #[test]
    fn what_a_proxy_cannot_serve_is_refused_with_a_reason() {
        for (head, reason) in [
            (&b"GET /path HTTP/1.1\r\n\r\n"[..], "absolute http://"),
            (b"GET https://x.test/ HTTP/1.1\r\n\r\n", "CONNECT"),
            (b"CONNECT x.test HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT x.test:0 HTTP/1.1\r\n\r\n", "bad port"),
            (b"GET http://u:p@x.test/ HTTP/1.1\r\n\r\n", "credentials"),
            (b"BREW\r\n\r\n", "malformed"),
            (b"GET http://x.test/ SPDY/3\r\n\r\n", "protocol"),
        ] {
            let err = parse(head).unwrap_err().to_string();
            assert!(err.contains(reason), "{err}");
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
    }

    #[test]
    fn the_host_header_must_name_the_requests_host() {
        for head in [
            &b"GET http://allowed.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n"[..],
            b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n",
            b"GET http://allowed.test:8080/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nhost: other.test\r\n\r\n",
            b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n",
            b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:22\r\n\r\n",
        ] {
            let err = parse(head).unwrap_err();
            assert!(
                matches!(err, RequestError::HostMismatch { .. }),
                "{}: {err}",
                String::from_utf8_lossy(head)
            );
            assert!(err.to_string().contains("Host header"), "{err}");
        }
        // The same host however it is spelled, a CONNECT's Host without its port, none at all.
        for head in [
            &b"GET http://Allowed.Test./ HTTP/1.1\r\nHOST: allowed.test:80\r\n\r\n"[..],
            b"GET http://allowed.test:8080/ HTTP/1.1\r\nHost: ALLOWED.test.:8080\r\n\r\n",
            b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n",
            b"GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
        ] {
            let request = parse(head).unwrap();
            assert!(
                matches!(request.host.as_str(), "allowed.test" | "::1"),
                "{request:?}"
            );
        }
    }

    #[test]
    fn names_are_normalised_before_policy_and_pin() {
        let get = parse(b"GET http://ALLOWED.TEST./x HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((get.host.as_str(), get.port), ("allowed.test", 80));
        let connect = parse(b"CONNECT Allowed.Test.:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(connect.host, "allowed.test");
        assert!(matches!(
            parse(b"CONNECT .:443 HTTP/1.1\r\n\r\n"),
            Err(RequestError::NoHost(_))
        ));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
