//! HTTP to the agent's in-container server, made from INSIDE the container via `sandbox.exec`.
//!
//! Why not connect from the host: tasks may run without network (no route in at all), many
//! concurrent trials' servers listen on the same port (host port mappings would collide), and
//! this host must not send traffic to container bridge addresses. Every container has its own
//! loopback, so a tiny HTTP/1.1 client running in the container and talking to
//! `127.0.0.1:<port>` reaches exactly that trial's server and nothing else. The client is bash's
//! `/dev/tcp` plus `printf` and `cat`, which every image with bash has (no curl or python needed).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tasks::{ExecRequest, Sandbox, SandboxError};

/// Bodies up to this size travel in an env var (one exec); larger ones are uploaded as a file,
/// because a single env string is capped at 128 KiB by the kernel.
const INLINE_BODY_LIMIT: usize = 100_000;

/// The exit code the client uses when nothing accepts the connection.
const CONNECT_FAILED: i64 = 97;

/// The in-container client. `M`, `P`, `PORT`, `LEN` and the body come from env vars so nothing
/// is interpolated into the script.
const CLIENT: &str = r#"{ exec 3<>"/dev/tcp/127.0.0.1/$RUNNER_HTTP_PORT"; } 2>/dev/null || {
  echo "runner-http: nothing accepts connections on 127.0.0.1:$RUNNER_HTTP_PORT" >&2; exit 97; }
printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nUser-Agent: runner\r\nAccept: application/json\r\nConnection: close\r\n' \
  "$RUNNER_HTTP_METHOD" "$RUNNER_HTTP_PATH" "$RUNNER_HTTP_PORT" >&3
if [ -n "${RUNNER_HTTP_BODY_FILE:-}" ]; then
  printf 'Content-Type: application/json\r\nContent-Length: %s\r\n\r\n' "$RUNNER_HTTP_LEN" >&3
  cat "$RUNNER_HTTP_BODY_FILE" >&3; rm -f "$RUNNER_HTTP_BODY_FILE"
elif [ -n "${RUNNER_HTTP_LEN:-}" ]; then
  printf 'Content-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' "$RUNNER_HTTP_LEN" "$RUNNER_HTTP_BODY" >&3
else
  printf '\r\n' >&3
fi
cat <&3
"#;

/// A transport failure (distinct from an HTTP error status, which is a response).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Nothing listens on the port (server not up yet, or dead).
    #[error("nothing accepts connections on 127.0.0.1:{port} inside the container")]
    Connect {
        /// The port.
        port: u16,
    },
    /// The request did not finish in time (the in-container client was killed).
    #[error("{method} {path} did not answer within {secs:.1} s")]
    Timeout {
        /// Method.
        method: String,
        /// Path.
        path: String,
        /// The limit.
        secs: f64,
    },
    /// The client failed or the answer is not HTTP.
    #[error("{method} {path}: {message}")]
    Bad {
        /// Method.
        method: String,
        /// Path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The sandbox could not run the client.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// A parsed HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked), lossy UTF-8.
    pub body: String,
}

impl HttpResponse {
    /// True for 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.body)
    }
}

/// An HTTP client for one server port inside one trial's container.
#[derive(Debug, Clone)]
pub struct InContainerHttp {
    /// The server's port on the container's loopback.
    pub port: u16,
}

static BODY_FILE_COUNTER: AtomicU64 = AtomicU64::new(0);

impl InContainerHttp {
    /// A client for `port`.
    pub fn new(port: u16) -> Self {
        Self { port }
    }

    /// Sends `method path` with an optional JSON body; waits at most `timeout`.
    pub async fn request<S: Sandbox>(
        &self,
        sandbox: &S,
        method: &str,
        path: &str,
        body: Option<&str>,
        timeout: Duration,
    ) -> Result<HttpResponse, TransportError> {
        let mut request = ExecRequest::root(CLIENT).timeout(timeout);
        request
            .env
            .insert("RUNNER_HTTP_PORT".into(), self.port.to_string());
        request
            .env
            .insert("RUNNER_HTTP_METHOD".into(), method.into());
        request.env.insert("RUNNER_HTTP_PATH".into(), path.into());
        if let Some(body) = body {
            request
                .env
                .insert("RUNNER_HTTP_LEN".into(), body.len().to_string());
            if body.len() <= INLINE_BODY_LIMIT {
                request.env.insert("RUNNER_HTTP_BODY".into(), body.into());
            } else {
                let n = BODY_FILE_COUNTER.fetch_add(1, Ordering::Relaxed);
                let file = format!("/tmp/.runner-http-body-{}-{n}.json", std::process::id());
                sandbox
                    .upload_bytes(body.as_bytes().to_vec(), &file, 0o600)
                    .await?;
                request.env.insert("RUNNER_HTTP_BODY_FILE".into(), file);
            }
        }
        let bad = |message: String| TransportError::Bad {
            method: method.into(),
            path: path.into(),
            message,
        };
        let output = sandbox.exec(request).await?;
        if output.timed_out {
            return Err(TransportError::Timeout {
                method: method.into(),
                path: path.into(),
                secs: timeout.as_secs_f64(),
            });
        }
        match output.exit_code {
            Some(0) => {}
            Some(CONNECT_FAILED) => return Err(TransportError::Connect { port: self.port }),
            code => {
                let code = code.map_or("none".into(), |c| c.to_string());
                return Err(bad(format!(
                    "the in-container client exited with {code}: {}",
                    output.stderr.trim()
                )));
            }
        }
        parse_response(&output.stdout).map_err(|e| bad(e.to_string()))
    }
}

/// Output of the in-container client that is not an HTTP/1.x response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// No blank line ends the header (the output stopped early).
    #[error("no complete HTTP response header in {0} bytes of output")]
    NoHeader(usize),
    /// The first line is not `HTTP/x status ...` (its first 80 characters).
    #[error("not an HTTP status line: {0:?}")]
    StatusLine(String),
    /// A chunked body ends before its last chunk.
    #[error("truncated chunked body")]
    TruncatedBody,
    /// A chunk's size is not hexadecimal.
    #[error("bad chunk size {0:?}")]
    ChunkSize(String),
    /// A chunk is shorter than its size.
    #[error("truncated chunk")]
    TruncatedChunk,
}

/// Parses a raw HTTP/1.x response (status line, headers, body; chunked or sized).
pub fn parse_response(raw: &str) -> Result<HttpResponse, ResponseError> {
    let (head, rest) = raw
        .split_once("\r\n\r\n")
        .or_else(|| raw.split_once("\n\n"))
        .ok_or(ResponseError::NoHeader(raw.len()))?;
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or_default();
    let status = parts.next().and_then(|s| s.parse::<u16>().ok());
    let Some(status) = status.filter(|_| version.starts_with("HTTP/")) else {
        return Err(ResponseError::StatusLine(
            status_line.chars().take(80).collect(),
        ));
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let body = if header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        dechunk(rest)?
    } else if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        rest.get(..len).unwrap_or(rest).to_owned()
    } else {
        rest.to_owned()
    };
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &str) -> Result<String, ResponseError> {
    let mut body = String::new();
    loop {
        let (size_line, after) = rest
            .split_once("\r\n")
            .ok_or(ResponseError::TruncatedBody)?;
        let size_text = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ResponseError::ChunkSize(size_text.to_owned()))?;
        if size == 0 {
            return Ok(body);
        }
        let chunk = after.get(..size).ok_or(ResponseError::TruncatedChunk)?;
        body.push_str(chunk);
        rest = after
            .get(size..)
            .unwrap_or_default()
            .trim_start_matches("\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sized_chunked_and_unsized_responses() {
        let r = parse_response("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}junk").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "{\"a\":1}"));
        let r = parse_response("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n").unwrap();
        assert_eq!((r.status, r.body.as_str()), (201, "{\"a\":1}"));
        let r = parse_response("HTTP/1.1 404 Not Found\r\n\r\nnope").unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "nope"));
        assert!(!r.is_success());
        assert!(parse_response("garbage").is_err());
        assert!(parse_response("SSH-2.0\r\n\r\n").is_err());
    }
}
