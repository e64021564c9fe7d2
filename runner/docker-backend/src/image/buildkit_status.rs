//! BuildKit's progress messages, as the engine relays them during a `version=2` build: each
//! `{"id":"moby.buildkit.trace","aux":"<base64>"}` line holds one protobuf `StatusResponse`
//! (moby/buildkit `api/services/control/control.proto`). Only the fields a plain log needs
//! are declared; prost skips the rest. [`PlainProgress`] renders them as `docker build
//! --progress=plain` does: `#3 [2/3] RUN make`, the step's output, `#3 DONE 1.2s`.

use std::collections::HashMap;

use prost::Message;

/// `moby.buildkit.v1.StatusResponse` (fields 1 and 3; statuses and warnings are skipped).
#[derive(Clone, PartialEq, Message)]
pub struct StatusResponse {
    /// Build steps whose state changed.
    #[prost(message, repeated, tag = "1")]
    pub vertexes: Vec<Vertex>,
    /// Output of running steps.
    #[prost(message, repeated, tag = "3")]
    pub logs: Vec<VertexLog>,
}

/// `moby.buildkit.v1.Vertex`: one build step.
#[derive(Clone, PartialEq, Message)]
pub struct Vertex {
    /// The step's digest (its identity across messages).
    #[prost(string, tag = "1")]
    pub digest: String,
    /// `[2/3] RUN make`.
    #[prost(string, tag = "3")]
    pub name: String,
    /// Served from the build cache.
    #[prost(bool, tag = "4")]
    pub cached: bool,
    /// When it started.
    #[prost(message, optional, tag = "5")]
    pub started: Option<Timestamp>,
    /// When it completed.
    #[prost(message, optional, tag = "6")]
    pub completed: Option<Timestamp>,
    /// Why it failed.
    #[prost(string, tag = "7")]
    pub error: String,
}

/// `google.protobuf.Timestamp`.
#[derive(Clone, Copy, PartialEq, Message)]
pub struct Timestamp {
    /// Seconds since the epoch.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Nanoseconds within the second.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    fn secs(self) -> f64 {
        self.seconds as f64 + f64::from(self.nanos) / 1e9
    }
}

/// `moby.buildkit.v1.VertexLog`: output of a step.
#[derive(Clone, PartialEq, Message)]
pub struct VertexLog {
    /// The step's digest.
    #[prost(string, tag = "1")]
    pub vertex: String,
    /// The bytes written.
    #[prost(bytes = "vec", tag = "4")]
    pub msg: Vec<u8>,
}

/// Decodes the base64 `aux` of a trace message.
pub fn decode_trace(aux: &str) -> Option<StatusResponse> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(aux).ok()?;
    StatusResponse::decode(bytes.as_slice()).ok()
}

#[derive(Debug, Default)]
struct Step {
    number: usize,
    announced: bool,
    finished: bool,
    partial: String,
}

/// Turns status messages into plain log lines, numbering steps in the order they appear.
#[derive(Debug, Default)]
pub struct PlainProgress {
    steps: HashMap<String, Step>,
}

impl PlainProgress {
    /// The lines `status` adds to the log, and the name of any step that started with it
    /// (for the live view).
    pub fn render(&mut self, status: &StatusResponse) -> (Vec<String>, Option<String>) {
        let mut lines = Vec::new();
        let mut started = None;
        for vertex in &status.vertexes {
            let next = self.steps.len() + 1;
            let step = self.steps.entry(vertex.digest.clone()).or_insert(Step {
                number: next,
                ..Step::default()
            });
            let n = step.number;
            let begun = vertex.started.is_some() || vertex.cached || vertex.completed.is_some();
            if !step.announced && begun && !vertex.name.is_empty() {
                step.announced = true;
                lines.push(format!("#{n} {}", vertex.name));
                started = Some(vertex.name.clone());
            }
            if step.finished {
                continue;
            }
            if !vertex.error.is_empty() {
                step.finished = true;
                lines.push(format!("#{n} ERROR: {}", vertex.error));
            } else if vertex.cached {
                step.finished = true;
                lines.push(format!("#{n} CACHED"));
            } else if let Some(done) = vertex.completed {
                step.finished = true;
                let took = vertex
                    .started
                    .map(|s| (done.secs() - s.secs()).max(0.0))
                    .unwrap_or(0.0);
                lines.push(format!("#{n} DONE {took:.1}s"));
            }
        }
        for log in &status.logs {
            let next = self.steps.len() + 1;
            let step = self.steps.entry(log.vertex.clone()).or_insert(Step {
                number: next,
                ..Step::default()
            });
            step.partial.push_str(&String::from_utf8_lossy(&log.msg));
            // Output arrives in chunks; only whole lines are logged, the rest waits.
            while let Some(end) = step.partial.find('\n') {
                let line: String = step.partial.drain(..=end).collect();
                lines.push(format!("#{} {}", step.number, line.trim_end()));
            }
        }
        (lines, started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(seconds: i64) -> Option<Timestamp> {
        Some(Timestamp { seconds, nanos: 0 })
    }

    #[test]
    fn steps_output_and_outcomes_render_as_plain_progress() {
        let mut plain = PlainProgress::default();
        let run = |started, completed, error: &str| Vertex {
            digest: "sha256:run".into(),
            name: "[2/2] RUN make".into(),
            cached: false,
            started,
            completed,
            error: error.into(),
        };
        let from = Vertex {
            digest: "sha256:from".into(),
            name: "[1/2] FROM base".into(),
            cached: true,
            started: None,
            completed: None,
            error: String::new(),
        };
        let status = StatusResponse {
            vertexes: vec![from, run(ts(10), None, "")],
            logs: vec![VertexLog {
                vertex: "sha256:run".into(),
                msg: b"compiling\npart".to_vec(),
            }],
        };
        // Through the wire format, as the engine sends it.
        let wire = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            status.encode_to_vec(),
        );
        let (lines, started) = plain.render(&decode_trace(&wire).unwrap());
        assert_eq!(
            lines,
            [
                "#1 [1/2] FROM base",
                "#1 CACHED",
                "#2 [2/2] RUN make",
                "#2 compiling"
            ]
        );
        assert_eq!(started.as_deref(), Some("[2/2] RUN make"));
        let status = StatusResponse {
            vertexes: vec![run(ts(10), ts(12), "exit code: 3")],
            logs: vec![VertexLog {
                vertex: "sha256:run".into(),
                msg: b"ial line\n".to_vec(),
            }],
        };
        let (lines, started) = plain.render(&status);
        assert_eq!(lines, ["#2 ERROR: exit code: 3", "#2 partial line"]);
        assert_eq!(started, None);
        assert!(decode_trace("not base64!").is_none());
    }
}
