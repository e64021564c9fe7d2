//! Which headers cross the bridge, in each direction.
//!
//! Towards the upstream, everything the agent's SDK sends passes (its version headers,
//! `anthropic-version`, `anthropic-beta`, `openai-beta`, ...) except credentials, hop-by-hop
//! headers and headers the bridge must own: `accept-encoding` is forced to `identity` so usage
//! can be read from the body and secrets redacted from it. Towards the agent, the upstream's
//! headers pass except hop-by-hop ones, the length (redaction may change it), cookies and the
//! account's organization name.

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::config::ApiKind;

/// Hop-by-hop headers (RFC 9110 §7.6.1) and proxy credentials: never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authenticate",
    "proxy-authorization",
];

/// Request headers the bridge drops besides hop-by-hop ones: the agent's credentials (the
/// token), headers that describe the agent's connection rather than the call, and account
/// selectors that belong to whoever owns the real key.
const DROPPED_REQUEST: &[&str] = &[
    "host",
    "content-length",
    "authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "accept-encoding",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "openai-organization",
    "openai-project",
];

/// Response headers dropped besides hop-by-hop ones.
const DROPPED_RESPONSE: &[&str] = &[
    "content-length",
    "set-cookie",
    "openai-organization",
    "openai-project",
];

/// A provider key that cannot be sent in a header (a newline or another control character
/// in it); the key itself is never shown.
#[derive(Debug, thiserror::Error)]
#[error("the provider key holds characters not allowed in a header")]
pub struct KeyNotAHeader(#[source] header::InvalidHeaderValue);

/// The headers sent upstream: the agent's, filtered, plus the real key in the provider's
/// own header.
pub fn upstream_headers(
    incoming: &HeaderMap,
    api: ApiKind,
    key: &str,
) -> Result<HeaderMap, KeyNotAHeader> {
    let mut headers = passed(incoming, DROPPED_REQUEST);
    headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    let key_value = |text: String| {
        let mut value = HeaderValue::from_str(&text).map_err(KeyNotAHeader)?;
        value.set_sensitive(true);
        Ok::<HeaderValue, KeyNotAHeader>(value)
    };
    match api {
        ApiKind::OpenAi => {
            headers.insert(header::AUTHORIZATION, key_value(format!("Bearer {key}"))?);
        }
        ApiKind::Anthropic => {
            headers.insert(
                HeaderName::from_static("x-api-key"),
                key_value(key.to_owned())?,
            );
        }
    }
    Ok(headers)
}

/// The headers passed back to the agent.
pub fn agent_headers(upstream: &HeaderMap) -> HeaderMap {
    passed(upstream, DROPPED_RESPONSE)
}

/// `headers` without hop-by-hop ones and without those named in `dropped` (lower case);
/// repeated headers keep all their values, in order.
fn passed(headers: &HeaderMap, dropped: &[&str]) -> HeaderMap {
    let mut kept = HeaderMap::new();
    for (name, value) in headers {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower) || dropped.contains(&lower) {
            continue;
        }
        kept.append(name.clone(), value.clone());
    }
    kept
}

/// The per-trial token the agent presented, from `Authorization: Bearer` (OpenAI SDKs) or
/// `x-api-key` (Anthropic SDKs); agents may send either to either API.
pub fn presented_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    let bearer = headers
        .get_all(header::AUTHORIZATION)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    let api_key = headers
        .get_all("x-api-key")
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim);
    bearer.chain(api_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn credentials_are_replaced_and_sdk_headers_pass() {
        let incoming = header_map(&[
            ("authorization", "Bearer runner-trial-x"),
            ("x-api-key", "runner-trial-x"),
            ("anthropic-version", "2023-06-01"),
            ("accept-encoding", "gzip"),
            ("connection", "keep-alive"),
            ("host", "127.0.0.1:4141"),
            ("openai-organization", "someone-else"),
        ]);

        let openai = upstream_headers(&incoming, ApiKind::OpenAi, "sk-real").unwrap();
        assert_eq!(openai["authorization"], "Bearer sk-real");
        assert!(openai.get("x-api-key").is_none());
        assert_eq!(openai["accept-encoding"], "identity");
        assert_eq!(openai["anthropic-version"], "2023-06-01");
        for gone in ["connection", "host", "openai-organization"] {
            assert!(openai.get(gone).is_none(), "{gone}");
        }
        let anthropic = upstream_headers(&incoming, ApiKind::Anthropic, "sk-ant-real").unwrap();
        assert_eq!(anthropic["x-api-key"], "sk-ant-real");
        assert!(anthropic.get("authorization").is_none());

        let tokens: Vec<&str> = presented_tokens(&incoming).collect();
        assert_eq!(tokens, vec!["runner-trial-x", "runner-trial-x"]);
    }

    #[test]
    fn response_headers_lose_length_and_cookies() {
        let upstream = header_map(&[
            ("content-length", "10"),
            ("set-cookie", "a=b"),
            ("x-request-id", "req_1"),
            ("content-type", "text/event-stream"),
        ]);
        let agent = agent_headers(&upstream);
        assert_eq!(agent.len(), 2);
        assert_eq!(agent["x-request-id"], "req_1");
    }
}
