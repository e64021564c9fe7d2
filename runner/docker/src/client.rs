//! The connection to one Docker engine: the default one (`DOCKER_HOST`, else the default
//! socket), or an engine of a pool named by URL (`--docker-host`).

use bollard::Docker;

use crate::DockerError;
use crate::engine_http::Endpoint;

/// bollard's request timeout bounds only the time to response headers; long operations
/// carry their own deadlines. Uploads of big trees need the headroom.
const REQUEST_TIMEOUT_SECS: u64 = 600;

/// An engine named by URL, with the user's optional cap on its trials: `unix:///path`,
/// `tcp://host:port` (plain HTTP), each optionally followed by `#n=8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineUrl {
    /// The URL without the cap.
    pub url: String,
    /// `#n=N`: at most N trials at once on this engine.
    pub max_trials: Option<usize>,
}

impl EngineUrl {
    /// Parses `URL[#n=N]`. TLS (`DOCKER_TLS_VERIFY`, `https://`) and `ssh://` engines are
    /// refused by name: this runner's pool speaks to `unix://` and plain `tcp://` engines.
    pub fn parse(text: &str) -> Result<EngineUrl, String> {
        let (url, cap) = match text.split_once('#') {
            Some((url, cap)) => (url, Some(cap)),
            None => (text, None),
        };
        let max_trials = match cap {
            None => None,
            Some(cap) => {
                let n = cap
                    .strip_prefix("n=")
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| *n > 0);
                Some(n.ok_or_else(|| {
                    format!("engine {text}: the cap after '#' must be n=N with N at least 1 (as in unix:///run/docker.sock#n=8)")
                })?)
            }
        };
        Endpoint::parse(url, false).map_err(|_| {
            format!(
                "engine {text}: not an engine URL this runner can use; give unix:///path/to/docker.sock or tcp://host:port (TLS and ssh:// engines are not supported yet)"
            )
        })?;
        if url == "unix://" || url == "tcp://" {
            return Err(format!("engine {text}: the URL names no socket or host"));
        }
        Ok(EngineUrl {
            url: url.to_owned(),
            max_trials,
        })
    }

    /// How records name the engine: the URL itself, which for these schemes holds no
    /// credentials.
    pub fn name(&self) -> &str {
        &self.url
    }
}

/// A connected Docker engine.
#[derive(Clone)]
pub struct DockerClient {
    docker: Docker,
    /// Where image builds are sent (the same engine, over plain HTTP), or why builds cannot
    /// reach it (said when a build needs it).
    endpoint: Result<Endpoint, String>,
    /// Set once the engine refused a writable-layer quota (`--storage-opt size`): its storage
    /// driver cannot enforce one, so later containers are created without asking again (every
    /// trial has a storage limit, so asking each time would double every create).
    quota_refused: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl DockerClient {
    /// Connects through `DOCKER_HOST` or the default socket and checks the engine answers.
    pub async fn connect() -> Result<DockerClient, DockerError> {
        let docker =
            Docker::connect_with_defaults().map_err(|e| DockerError::Connect(e.to_string()))?;
        // A DOCKER_HOST builds cannot use is refused when a build needs it, not here: a
        // job of prebuilt images runs on any engine bollard reaches.
        Self::checked(docker, Endpoint::from_env()).await
    }

    /// Connects to the engine `engine` names and checks it answers.
    pub async fn connect_to(engine: &EngineUrl) -> Result<DockerClient, DockerError> {
        let docker = Docker::connect_with_host(&engine.url)
            .map_err(|e| DockerError::Connect(format!("{}: {e}", engine.url)))?;
        Self::checked(docker, Endpoint::parse(&engine.url, false))
            .await
            .map_err(|e| DockerError::Connect(format!("{}: {e}", engine.url)))
    }

    async fn checked(
        docker: Docker,
        endpoint: Result<Endpoint, String>,
    ) -> Result<DockerClient, DockerError> {
        let client = DockerClient {
            docker: docker.with_timeout(std::time::Duration::from_secs(REQUEST_TIMEOUT_SECS)),
            endpoint,
            quota_refused: Default::default(),
        };
        client.ping().await?;
        Ok(client)
    }

    /// Asks whether the engine answers.
    pub async fn ping(&self) -> Result<(), DockerError> {
        self.docker
            .ping()
            .await
            .map(|_| ())
            .map_err(|e| DockerError::Connect(e.to_string()))
    }

    /// Where builds go, or why they cannot.
    pub(crate) fn endpoint(&self) -> Result<Endpoint, String> {
        self.endpoint.clone()
    }

    /// True once the engine refused a storage quota (see the field).
    pub(crate) fn quota_refused(&self) -> bool {
        self.quota_refused
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Remembers that the engine refuses storage quotas.
    pub(crate) fn refuse_quotas(&self) {
        self.quota_refused
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The bollard handle.
    pub(crate) fn api(&self) -> &Docker {
        &self.docker
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_urls_take_a_cap_and_refuse_what_the_pool_cannot_speak() {
        let plain = EngineUrl::parse("unix:///run/docker-b.sock").unwrap();
        assert_eq!(plain.url, "unix:///run/docker-b.sock");
        assert_eq!(plain.max_trials, None);
        let capped = EngineUrl::parse("tcp://127.0.0.1:2375#n=8").unwrap();
        assert_eq!(capped.name(), "tcp://127.0.0.1:2375");
        assert_eq!(capped.max_trials, Some(8));
        for bad in [
            "unix:///s#n=0",
            "unix:///s#8",
            "ssh://me@host",
            "https://h:2376",
            "tcp://",
            "/run/docker.sock",
        ] {
            let err = EngineUrl::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
