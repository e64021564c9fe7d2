//! Pulling a prebuilt image through the engine: rate-limited attempts, retried with backoff on
//! answers that can pass (429, 5xx, timeouts, dropped connections), progress in layers and
//! bytes, and a typed failure naming the image and the registry's last answer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bollard::auth::DockerCredentials;
use bollard::models::CreateImageInfo;
use bollard::query_parameters::CreateImageOptionsBuilder;
use engine::{IMAGE_PROGRESS_STREAM, OutputSink};
use futures_util::StreamExt;

use crate::connect::DockerClient;
use crate::error::DockerError;
use crate::image::rate::RateLimiter;
use crate::image::reference::ImageRef;

/// How hard a pull tries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PullRetryPolicy {
    /// Attempts in all (the first included).
    pub attempts: u32,
    /// The wait before the second attempt; it doubles for each later one.
    pub first_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// An attempt whose stream says nothing for this long is abandoned and retried.
    pub idle_timeout: Duration,
}

impl Default for PullRetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            first_backoff: Duration::from_secs(2),
            max_backoff: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl PullRetryPolicy {
    /// The wait after failed attempt `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.first_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// What one successful pull did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PullStats {
    /// Layers of the image.
    pub layers: usize,
    /// Layers that were already present.
    pub layers_present: usize,
    /// Bytes downloaded (compressed), as the engine reported them.
    pub bytes_downloaded: u64,
    /// The manifest digest the registry served (`sha256:…`), from the engine's `Digest:` line.
    pub digest: Option<String>,
    /// Attempts it took.
    pub attempts: u32,
}

/// Pulls `image` (as written in the task: `written`), trying up to `policy.attempts` times.
/// Each attempt first takes a start from `limiter`. Progress goes to `log` on the progress
/// stream (at most once a second), retries and the outcome on the runner stream.
pub async fn pull(
    client: &DockerClient,
    image: &ImageRef,
    written: &str,
    credentials: Option<DockerCredentials>,
    limiter: &RateLimiter,
    policy: &PullRetryPolicy,
    log: &OutputSink,
) -> Result<PullStats, DockerError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let waited = limiter.acquire().await;
        if waited >= Duration::from_secs(1) {
            log(
                "runner",
                format!(
                    "pull of {written} waited {:.1}s for the pull-rate limit\n",
                    waited.as_secs_f64()
                )
                .as_bytes(),
            );
        }
        match pull_once(client, image, written, credentials.clone(), policy, log).await {
            Ok(mut stats) => {
                stats.attempts = attempt;
                return Ok(stats);
            }
            Err(answer) if is_retryable(&answer.to_string()) && attempt < policy.attempts => {
                let wait = policy.backoff(attempt);
                log(
                    "runner",
                    format!(
                        "pull of {written} failed (attempt {attempt}/{}): {answer}; retrying in {}s\n",
                        policy.attempts,
                        wait.as_secs_f64()
                    )
                    .as_bytes(),
                );
                tokio::time::sleep(wait).await;
            }
            Err(answer) => {
                return Err(DockerError::Pull {
                    image: written.to_owned(),
                    attempts: attempt,
                    answer: answer.to_string(),
                });
            }
        }
    }
}

/// Why one pull attempt failed; the message is the engine's or registry's answer, which
/// [`is_retryable`] reads.
#[derive(Debug, thiserror::Error)]
enum PullAttemptError {
    /// The engine's progress stream went quiet for the policy's idle timeout.
    #[error("timeout: the engine reported nothing for {0}s")]
    Idle(u64),
    /// The engine API call failed (its answer, without bollard's wrapping).
    #[error("{}", engine_answer(.0))]
    Engine(#[source] bollard::errors::Error),
    /// The engine relayed an error of the registry in its progress stream.
    #[error("{0}")]
    Registry(String),
}

/// One attempt; `Err` is the engine's or registry's answer.
async fn pull_once(
    client: &DockerClient,
    image: &ImageRef,
    written: &str,
    credentials: Option<DockerCredentials>,
    policy: &PullRetryPolicy,
    log: &OutputSink,
) -> Result<PullStats, PullAttemptError> {
    let options = CreateImageOptionsBuilder::default()
        .from_image(&image.name())
        .tag(&image.pull_tag())
        .build();
    let mut stream = client.api().create_image(Some(options), None, credentials);
    let mut progress = PullProgress::default();
    let mut last_shown = Instant::now();
    loop {
        let item = match tokio::time::timeout(policy.idle_timeout, stream.next()).await {
            Ok(Some(item)) => item,
            Ok(None) => break,
            Err(_) => {
                return Err(PullAttemptError::Idle(policy.idle_timeout.as_secs()));
            }
        };
        let info = item.map_err(PullAttemptError::Engine)?;
        if let Some(error) = info.error_detail.as_ref().and_then(|d| d.message.clone()) {
            return Err(PullAttemptError::Registry(error));
        }
        progress.update(&info);
        if last_shown.elapsed() >= Duration::from_secs(1) {
            last_shown = Instant::now();
            log(
                IMAGE_PROGRESS_STREAM,
                format!("pulling {written}: {}\n", progress.summary()).as_bytes(),
            );
        }
    }
    log(
        IMAGE_PROGRESS_STREAM,
        format!("pulled {written}: {}\n", progress.summary()).as_bytes(),
    );
    Ok(progress.stats())
}

/// The text of an engine error, without bollard's wrapping.
fn engine_answer(error: &bollard::errors::Error) -> String {
    use bollard::errors::Error as E;
    match error {
        E::DockerResponseServerError { message, .. } => message.clone(),
        E::DockerStreamError { error } => error.clone(),
        E::RequestTimeoutError => "timeout: the engine did not answer in time".into(),
        other => other.to_string(),
    }
}

/// True for answers that may pass on a later attempt: rate limits (429), server errors (5xx),
/// timeouts and dropped connections. A missing image, a refused login or a full disk is final.
pub fn is_retryable(answer: &str) -> bool {
    let text = answer.to_ascii_lowercase();
    const FINAL: [&str; 8] = [
        "manifest unknown",
        "not found",
        "does not exist",
        "unauthorized",
        "denied",
        "authentication required",
        "no basic auth credentials",
        "no space left on device",
    ];
    if FINAL.iter().any(|f| text.contains(f)) {
        return false;
    }
    const PASSING: [&str; 12] = [
        "toomanyrequests",
        "too many requests",
        "http 429",
        "status: 429",
        "status: 5",
        "http 5",
        "timeout",
        "timed out",
        "connection reset",
        "connection refused",
        "eof",
        "broken pipe",
    ];
    PASSING.iter().any(|p| text.contains(p))
}

/// Layers and bytes of a pull, from the engine's progress messages.
#[derive(Debug, Default)]
struct PullProgress {
    /// Per layer id: (downloaded, total, done, already present).
    layers: BTreeMap<String, Layer>,
    digest: Option<String>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Layer {
    current: u64,
    total: u64,
    done: bool,
    present: bool,
}

impl PullProgress {
    fn update(&mut self, info: &CreateImageInfo) {
        let status = info.status.as_deref().unwrap_or_default();
        if let Some(digest) = status.strip_prefix("Digest: ") {
            self.digest = Some(digest.trim().to_owned());
            return;
        }
        // Messages with an id that is a layer: the first one names the tag ("Pulling from").
        let Some(id) = info.id.as_deref() else { return };
        if status.starts_with("Pulling from") {
            return;
        }
        let layer = self.layers.entry(id.to_owned()).or_default();
        let detail = info.progress_detail.as_ref();
        let (current, total) = (
            detail.and_then(|d| d.current).unwrap_or(0).max(0) as u64,
            detail.and_then(|d| d.total).unwrap_or(0).max(0) as u64,
        );
        match status {
            "Downloading" => {
                layer.current = current;
                layer.total = layer.total.max(total);
            }
            "Download complete" | "Verifying Checksum" => layer.current = layer.total,
            "Pull complete" => {
                layer.current = layer.total;
                layer.done = true;
            }
            "Already exists" => {
                layer.done = true;
                layer.present = true;
            }
            _ => {}
        }
    }

    fn stats(&self) -> PullStats {
        PullStats {
            layers: self.layers.len(),
            layers_present: self.layers.values().filter(|l| l.present).count(),
            bytes_downloaded: self.layers.values().map(|l| l.current).sum(),
            digest: self.digest.clone(),
            attempts: 0,
        }
    }

    /// `3/7 layers, 120.5/300.0 MB`.
    fn summary(&self) -> String {
        let done = self.layers.values().filter(|l| l.done).count();
        let current: u64 = self.layers.values().map(|l| l.current).sum();
        let total: u64 = self.layers.values().map(|l| l.total).sum();
        let mb = |b: u64| b as f64 / 1e6;
        format!(
            "{done}/{} layers, {:.1}/{:.1} MB",
            self.layers.len(),
            mb(current),
            mb(total)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::ProgressDetail;

    #[test]
    fn registry_answers_are_sorted_into_retryable_and_final() {
        for passing in [
            "received unexpected HTTP status: 503 Service Unavailable",
            "error parsing HTTP 429 response body: unexpected end of JSON input: \"\"",
            "toomanyrequests: You have reached your pull rate limit",
            "Get \"http://127.0.0.1:1/v2/\": net/http: request canceled (Client.Timeout exceeded)",
            "dial tcp 127.0.0.1:5000: connect: connection refused",
            "unexpected EOF",
        ] {
            assert!(is_retryable(passing), "{passing}");
        }
        for final_answer in [
            "manifest for 127.0.0.1:5000/x:1 not found: manifest unknown: manifest unknown",
            "pull access denied for x, repository does not exist or may require 'docker login'",
            "unauthorized: authentication required",
            "write /var/lib/docker/tmp: no space left on device",
            "invalid reference format",
        ] {
            assert!(!is_retryable(final_answer), "{final_answer}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = PullRetryPolicy::default();
        let secs: Vec<u64> = (1..=6).map(|a| policy.backoff(a).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 30, 30]);
    }

    fn message(id: &str, status: &str, current: i64, total: i64) -> CreateImageInfo {
        CreateImageInfo {
            id: Some(id.into()),
            status: Some(status.into()),
            progress_detail: Some(ProgressDetail {
                current: Some(current),
                total: Some(total),
            }),
            ..CreateImageInfo::default()
        }
    }

    #[test]
    fn progress_counts_layers_and_bytes() {
        let mut p = PullProgress::default();
        p.update(&message("1", "Pulling from x", 0, 0));
        p.update(&message("a", "Already exists", 0, 0));
        p.update(&message("b", "Pulling fs layer", 0, 0));
        p.update(&message("b", "Downloading", 1_000_000, 3_000_000));
        assert_eq!(p.summary(), "1/2 layers, 1.0/3.0 MB");
        p.update(&message("b", "Download complete", 0, 0));
        p.update(&message("b", "Extracting", 5, 10));
        p.update(&message("b", "Pull complete", 0, 0));
        p.update(&CreateImageInfo {
            status: Some("Digest: sha256:abc".into()),
            ..CreateImageInfo::default()
        });
        assert_eq!(p.summary(), "2/2 layers, 3.0/3.0 MB");
        let stats = p.stats();
        assert_eq!(
            (stats.layers, stats.layers_present, stats.bytes_downloaded),
            (2, 1, 3_000_000)
        );
        assert_eq!(stats.digest.as_deref(), Some("sha256:abc"));
    }
}
