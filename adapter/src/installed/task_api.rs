//! The agent's task API: submit the instruction, read the task's status, cancel it.

use std::time::Duration;

use serde_json::{Value, json};
use tasks::Sandbox;

use super::config::ApiSection;
use super::transport::{HttpResponse, InContainerHttp, TransportError};

/// A task API call that did not give a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The server answered with a non-2xx status or an unusable body.
    #[error("{call}: {message}")]
    Answer {
        /// Which call, e.g. `POST /api/tasks`.
        call: String,
        /// What was wrong.
        message: String,
    },
}

/// What the agent is told with the instruction.
#[derive(Debug, Clone)]
pub struct Submission<'a> {
    /// The exact instruction text.
    pub instruction: &'a str,
    /// The workspace root in the container.
    pub workspace_root: &'a str,
    /// The task's agent timeout, so the agent knows its deadline.
    pub timeout_sec: Option<f64>,
    /// The task's name (informational; lets scripted agents pick a plan).
    pub task_name: &'a str,
    /// More metadata: the task's skills and MCP servers (see
    /// [`task_extras::submission_metadata`](super::task_extras::submission_metadata)), the step.
    pub extra_metadata: serde_json::Map<String, Value>,
}

/// A status answer.
#[derive(Debug, Clone)]
pub struct TaskStatus {
    /// The status string.
    pub status: String,
    /// The whole answer.
    pub body: Value,
}

/// The task API of one server.
#[derive(Debug, Clone)]
pub struct TaskApi<'a> {
    /// The transport.
    pub http: &'a InContainerHttp,
    /// Paths and field names.
    pub api: &'a ApiSection,
}

fn expect_json(call: &str, resp: HttpResponse) -> Result<Value, ApiError> {
    let answer = |message: String| ApiError::Answer {
        call: call.into(),
        message,
    };
    if !resp.is_success() {
        let snippet: String = resp.body.chars().take(300).collect();
        return Err(answer(format!("HTTP {}: {snippet}", resp.status)));
    }
    resp.json()
        .map_err(|e| answer(format!("the answer is not JSON ({e})")))
}

impl TaskApi<'_> {
    /// The JSON body POSTed to create the task.
    pub fn submission_body(submission: &Submission<'_>) -> Value {
        let mut body = json!({
            "instruction": submission.instruction,
            "workspace_root": submission.workspace_root,
            "metadata": {
                "timeout_sec": submission.timeout_sec,
                "service_teardown": "keep",
                "task_name": submission.task_name,
            }
        });
        for (key, value) in &submission.extra_metadata {
            body["metadata"][key] = value.clone();
        }
        body
    }

    /// POSTs the task; returns its id.
    pub async fn submit<S: Sandbox>(
        &self,
        sandbox: &S,
        submission: &Submission<'_>,
        timeout: Duration,
    ) -> Result<String, ApiError> {
        let call = format!("POST {}", self.api.submit_path);
        let body = Self::submission_body(submission).to_string();
        let resp = self
            .http
            .request(sandbox, "POST", &self.api.submit_path, Some(&body), timeout)
            .await?;
        let value = expect_json(&call, resp)?;
        match value.get(&self.api.id_field) {
            Some(Value::String(id)) if !id.is_empty() => Ok(id.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            _ => Err(ApiError::Answer {
                call,
                message: format!(
                    "the answer has no `{}` field with the task id",
                    self.api.id_field
                ),
            }),
        }
    }

    /// GETs the task's status.
    pub async fn status<S: Sandbox>(
        &self,
        sandbox: &S,
        id: &str,
        timeout: Duration,
    ) -> Result<TaskStatus, ApiError> {
        let path = self.api.status_path.replace("{id}", &url_component(id));
        let call = format!("GET {path}");
        let resp = self
            .http
            .request(sandbox, "GET", &path, None, timeout)
            .await?;
        let body = expect_json(&call, resp)?;
        match body.get(&self.api.status_field).and_then(Value::as_str) {
            Some(status) => Ok(TaskStatus {
                status: status.to_owned(),
                body,
            }),
            None => Err(ApiError::Answer {
                call,
                message: format!("the answer has no string `{}` field", self.api.status_field),
            }),
        }
    }

    /// POSTs a cancel request.
    pub async fn cancel<S: Sandbox>(
        &self,
        sandbox: &S,
        id: &str,
        timeout: Duration,
    ) -> Result<(), ApiError> {
        let path = self.api.cancel_path.replace("{id}", &url_component(id));
        let call = format!("POST {path}");
        let resp = self
            .http
            .request(sandbox, "POST", &path, Some("{}"), timeout)
            .await?;
        if resp.is_success() {
            Ok(())
        } else {
            Err(ApiError::Answer {
                call,
                message: format!("HTTP {}", resp.status),
            })
        }
    }

    /// True when `status` ends polling.
    pub fn is_final(&self, status: &str) -> bool {
        self.api.final_statuses.iter().any(|s| s == status)
    }

    /// True when `status` means the agent finished its work.
    pub fn is_success(&self, status: &str) -> bool {
        self.api.success_statuses.iter().any(|s| s == status)
    }
}

/// Percent-encodes everything but unreserved characters, so an id cannot change the path.
fn url_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The poll interval after `current`: grows by half, capped.
pub fn next_interval(current: Duration, max: Duration) -> Duration {
    current.mul_f64(1.5).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_bounded() {
        let max = Duration::from_secs(5);
        let mut d = Duration::from_millis(250);
        let mut seen = vec![];
        for _ in 0..20 {
            seen.push(d);
            d = next_interval(d, max);
        }
        assert!(seen.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*seen.last().unwrap(), max);
        assert_eq!(seen[1], Duration::from_millis(375));
    }

    #[test]
    fn ids_are_encoded_into_paths() {
        assert_eq!(url_component("abc-1"), "abc-1");
        assert_eq!(url_component("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn submission_carries_deadline_and_teardown() {
        let body = TaskApi::submission_body(&Submission {
            instruction: "do it\n",
            workspace_root: "/app",
            timeout_sec: Some(60.0),
            task_name: "examples/x",
            extra_metadata: serde_json::Map::from_iter([("step".into(), json!("two"))]),
        });
        assert_eq!(body["metadata"]["step"], "two");
        assert_eq!(body["metadata"]["task_name"], "examples/x");
        assert_eq!(body["instruction"], "do it\n");
        assert_eq!(body["metadata"]["timeout_sec"], 60.0);
        assert_eq!(body["metadata"]["service_teardown"], "keep");
    }
}
