//! Image builds with BuildKit through the engine API: `POST /build?version=2` with the
//! deterministic context tar as the body, as `docker build` with BuildKit sends it, minus the
//! client session (the context travels in the body, so the engine's BuildKit reads it from
//! there; a session is only needed for build secrets, SSH forwarding and registry logins of
//! private base images, which task Dockerfiles do not use).
//!
//! Why not bollard's `buildkit` feature: it brings tonic, h2, axum, rustls and prost (56 more
//! crates; about 150 s more CPU for a cold compile of the backend's dependencies, measured) to
//! run the session over gRPC, which these builds do not need. Why not `docker build` as a
//! subprocess: the docker CLI on a machine may lack the buildx plugin (this one's does), and
//! the engine is already one socket away. Speed is BuildKit's either way: the same daemon
//! runs the same solver.

use std::collections::{HashMap, VecDeque};

use engine::{IMAGE_PROGRESS_STREAM, OutputSink};
use http_body_util::BodyExt;
use serde::Deserialize;

use crate::connect::engine_http::{Endpoint, read_text};
use crate::image::buildkit_status::{PlainProgress, decode_trace};

/// Lines of build output a failure message quotes.
const TAIL_LINES: usize = 15;
/// Longest line kept in the quoted tail.
const TAIL_LINE_CHARS: usize = 400;
/// A JSON message longer than this is skipped rather than held (the engine's are far shorter).
const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// One build.
pub struct BuildRequest<'a> {
    /// The tag to give the image.
    pub tag: &'a str,
    /// Labels on the image.
    pub labels: &'a HashMap<&'a str, &'a str>,
    /// The context as a tar (shared: a retry sends it again).
    pub context: bytes::Bytes,
    /// The Dockerfile's path inside the context (`Dockerfile` unless compose names another).
    pub dockerfile: &'a str,
    /// `--build-arg`s (compose `build.args`).
    pub build_args: &'a std::collections::BTreeMap<String, String>,
    /// The stage to build (compose `build.target`); the last stage when `None`.
    pub target: Option<&'a str>,
}

/// BuildKit's error when a build needed a client session: its base image needs registry
/// credentials, which only a session could supply.
pub const NEEDS_SESSION: &str = "no active sessions";

/// Why a build failed: the builder's error and the last lines of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildFailure {
    /// The engine's or BuildKit's error.
    pub error: String,
    /// The last lines of build output before it.
    pub tail: Vec<String>,
}

impl BuildFailure {
    /// `error`, then the quoted tail, for trial records and the terminal.
    pub fn message(&self) -> String {
        let mut out = self.error.trim().to_owned();
        if !self.tail.is_empty() {
            out.push_str("\nlast lines of the build output:");
            for line in &self.tail {
                out.push_str("\n  ");
                out.push_str(line);
            }
        }
        out
    }
}

/// A line of the engine's build answer.
#[derive(Debug, Deserialize)]
struct BuildMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    aux: Option<serde_json::Value>,
    #[serde(default)]
    stream: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, rename = "errorDetail")]
    error_detail: Option<ErrorDetail>,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: Option<String>,
}

/// Runs the build; output goes to `log` (stream `build`) as plain progress, the name of each
/// step as it starts to the progress stream.
pub async fn build(
    endpoint: &Endpoint,
    request: BuildRequest<'_>,
    log: &OutputSink,
) -> Result<(), BuildFailure> {
    let fail = |error: String, tail: &Tail| BuildFailure {
        error,
        tail: tail.lines.iter().cloned().collect(),
    };
    let mut tail = Tail::default();
    let labels = serde_json::to_string(request.labels).expect("string map");
    let mut query = vec![
        ("t", request.tag.to_owned()),
        ("dockerfile", request.dockerfile.to_owned()),
        ("version", "2".to_owned()),
        ("labels", labels),
    ];
    if !request.build_args.is_empty() {
        let args = serde_json::to_string(request.build_args).expect("string map");
        query.push(("buildargs", args));
    }
    if let Some(target) = request.target {
        query.push(("target", target.to_owned()));
    }
    let query = serde_urlencoded::to_string(&query).expect("plain pairs");
    let response = endpoint
        .post(
            &format!("/build?{query}"),
            "application/x-tar",
            request.context,
        )
        .await
        .map_err(|e| fail(e.to_string(), &tail))?;
    if !response.status().is_success() {
        let status = response.status();
        let text = read_text(response, 64 << 10).await;
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("message")?.as_str().map(str::to_owned))
            .unwrap_or(text);
        return Err(fail(
            format!("the engine refused the build ({status}): {message}"),
            &tail,
        ));
    }
    let mut progress = PlainProgress::default();
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut skipping = false;
    loop {
        let frame = match body.frame().await {
            None => break,
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                return Err(fail(
                    format!("the engine's build answer broke off: {e}"),
                    &tail,
                ));
            }
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if std::mem::take(&mut skipping) {
                continue;
            }
            handle_line(&line, &mut progress, &mut tail, log)
                .map_err(|e| fail(e.to_string(), &tail))?;
        }
        if pending.len() > MAX_MESSAGE_BYTES {
            pending.clear();
            skipping = true;
        }
    }
    if !skipping && !pending.is_empty() {
        handle_line(&pending, &mut progress, &mut tail, log)
            .map_err(|e| fail(e.to_string(), &tail))?;
    }
    Ok(())
}

/// The error a build's answer reported (BuildKit's `errorDetail.message`, else `error`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BuildReportedError(String);

/// One JSON line of the answer; `Err` is the build's error.
fn handle_line(
    line: &[u8],
    progress: &mut PlainProgress,
    tail: &mut Tail,
    log: &OutputSink,
) -> Result<(), BuildReportedError> {
    let text = String::from_utf8_lossy(line);
    if text.trim().is_empty() {
        return Ok(());
    }
    let Ok(message) = serde_json::from_str::<BuildMessage>(&text) else {
        // Not JSON: pass it on rather than lose it.
        tail.push_output(&text, log);
        return Ok(());
    };
    if let Some(error) = message
        .error_detail
        .and_then(|d| d.message)
        .or(message.error)
    {
        return Err(BuildReportedError(error));
    }
    if message.id.as_deref() == Some("moby.buildkit.trace")
        && let Some(aux) = message.aux.as_ref().and_then(|a| a.as_str())
        && let Some(status) = decode_trace(aux)
    {
        let (lines, started) = progress.render(&status);
        for line in lines {
            tail.push_output(&line, log);
        }
        if let Some(step) = started {
            log(
                IMAGE_PROGRESS_STREAM,
                format!("building: {step}\n").as_bytes(),
            );
        }
        return Ok(());
    }
    if let Some(stream) = message.stream {
        tail.push_output(&stream, log);
    }
    Ok(())
}

/// The last lines of output, for failure messages.
#[derive(Debug, Default)]
struct Tail {
    lines: VecDeque<String>,
}

impl Tail {
    fn push_output(&mut self, text: &str, log: &OutputSink) {
        log("build", format!("{}\n", text.trim_end()).as_bytes());
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if self.lines.len() == TAIL_LINES {
                self.lines.pop_front();
            }
            self.lines
                .push_back(line.chars().take(TAIL_LINE_CHARS).collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_failure_quotes_the_error_then_the_tail() {
        let failure = BuildFailure {
            error: "executor failed running [/bin/sh -c exit 3]: exit code: 3\n".into(),
            tail: vec![
                "#5 [2/2] RUN exit 3".into(),
                "#5 ERROR: exit code: 3".into(),
            ],
        };
        assert_eq!(
            failure.message(),
            "executor failed running [/bin/sh -c exit 3]: exit code: 3\n\
             last lines of the build output:\n  #5 [2/2] RUN exit 3\n  #5 ERROR: exit code: 3"
        );
    }

    #[test]
    fn the_tail_keeps_the_last_lines_and_everything_is_logged() {
        let logged = Arc::new(Mutex::new(String::new()));
        let sink = logged.clone();
        let log: OutputSink = Arc::new(move |stream, bytes| {
            sink.lock()
                .unwrap()
                .push_str(&format!("[{stream}] {}", String::from_utf8_lossy(bytes)))
        });
        let mut tail = Tail::default();
        let mut progress = PlainProgress::default();
        for i in 0..20 {
            let line = format!("{{\"stream\":\"line {i}\\n\"}}");
            handle_line(line.as_bytes(), &mut progress, &mut tail, &log).unwrap();
        }
        assert_eq!(tail.lines.len(), TAIL_LINES);
        assert_eq!(tail.lines.back().map(String::as_str), Some("line 19"));
        assert!(logged.lock().unwrap().contains("[build] line 0\n"));
        let err = handle_line(
            br#"{"errorDetail":{"message":"boom"},"error":"boom"}"#,
            &mut progress,
            &mut tail,
            &log,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "boom");
    }
}
