//! The engines a run uses: the default one (`DOCKER_HOST`, else the default socket), or a
//! pool named by `--docker-host` / `--docker-context` / `RUNNER_DOCKER_HOSTS` (see
//! `engine::pool`; TLS and ssh engines are reached as `docker_backend`'s `remote.rs` says). Each engine
//! is connected, checked for the verifier jail and reaped of what dead runs left before the
//! job starts, so a pool member that cannot run trials is refused by name up front.

use std::sync::Arc;

use docker_backend::{
    DockerBackend, DockerClient, EngineUrl, ImagePolicy, check_jail, context_engine,
    docker_config_dir, reap_dead_owners,
};
use engine::pool::{EnginePool, PoolMember};

use crate::exit::CliError;
use crate::note;

/// The run's engines, connected and checked.
pub enum Engines {
    /// One engine, as before pools existed.
    One(DockerClient),
    /// A pool: each engine's URL and connection.
    Pool(Vec<(EngineUrl, DockerClient)>),
}

/// The backend a job runs on.
// One value per run: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum JobBackend {
    /// One engine.
    One(DockerBackend),
    /// Several.
    Pool(EnginePool<DockerBackend>),
}

/// The engines of `--docker-host` (repeatable) and `--docker-context` (repeatable, read from
/// the Docker CLI's context store), or, without either flag, of `RUNNER_DOCKER_HOSTS`
/// (comma-separated): the flags name the whole pool. Empty for the default engine. The same
/// engine twice (by its name in records) is refused: it would double its share of trials.
pub fn engine_urls(hosts: &[String], contexts: &[String]) -> Result<Vec<EngineUrl>, CliError> {
    let from_env = std::env::var("RUNNER_DOCKER_HOSTS").unwrap_or_default();
    let (texts, source): (Vec<&str>, &str) = if hosts.is_empty() && contexts.is_empty() {
        (
            from_env
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect(),
            "RUNNER_DOCKER_HOSTS",
        )
    } else {
        (hosts.iter().map(String::as_str).collect(), "--docker-host")
    };
    let mut urls: Vec<EngineUrl> = Vec::new();
    for text in texts {
        let url = EngineUrl::parse(text).map_err(|e| CliError::bad_input_because(source, e))?;
        urls.push(url);
    }
    if !contexts.is_empty() {
        let config = docker_config_dir().ok_or_else(|| {
            CliError::bad_input(
                "--docker-context: neither DOCKER_CONFIG nor HOME is set, so the Docker CLI's context store cannot be found",
            )
        })?;
        for name in contexts {
            let url = context_engine(&config, name)
                .map_err(|e| CliError::bad_input_because(format!("--docker-context {name}"), e))?;
            urls.push(url);
        }
    }
    for (i, url) in urls.iter().enumerate() {
        if urls[..i].iter().any(|u| u.name() == url.name()) {
            return Err(CliError::bad_input(format!(
                "{}: engine {} is named twice",
                label(url),
                url.name()
            )));
        }
    }
    Ok(urls)
}

/// How messages name where an engine was given: `--docker-host URL` or
/// `--docker-context NAME (URL)`.
fn label(url: &EngineUrl) -> String {
    match &url.context {
        Some(name) => format!("--docker-context {name} ({})", url.name()),
        None => format!("--docker-host {}", url.name()),
    }
}

impl Engines {
    /// Connects to `urls` (the default engine when empty) and checks each can isolate the
    /// tests; a pool engine that does not answer or cannot is refused naming it.
    pub async fn connect(urls: Vec<EngineUrl>) -> Result<Engines, CliError> {
        if urls.is_empty() {
            let client = DockerClient::connect().await.map_err(CliError::bad_input)?;
            check_jail(&client).await.map_err(CliError::bad_input)?;
            return Ok(Engines::One(client));
        }
        let mut pool = Vec::new();
        for url in urls {
            let client = DockerClient::connect_to(&url)
                .await
                .map_err(|e| CliError::bad_input_because(label(&url), e))?;
            check_jail(&client)
                .await
                .map_err(|e| CliError::bad_input_because(format!("engine {}", url.name()), e))?;
            pool.push((url, client));
        }
        Ok(Engines::Pool(pool))
    }

    /// Every engine's connection (for the reaping and the second-Ctrl-C sweep).
    pub fn clients(&self) -> Vec<DockerClient> {
        match self {
            Engines::One(client) => vec![client.clone()],
            Engines::Pool(pool) => pool.iter().map(|(_, c)| c.clone()).collect(),
        }
    }

    /// Removes, on every engine, the containers of runner processes that are gone.
    pub async fn reap(&self) {
        let named =
            |url: Option<&EngineUrl>| url.map(|u| format!(" on {}", u.name())).unwrap_or_default();
        let each: Vec<(Option<&EngineUrl>, &DockerClient)> = match self {
            Engines::One(client) => vec![(None, client)],
            Engines::Pool(pool) => pool.iter().map(|(u, c)| (Some(u), c)).collect(),
        };
        for (url, client) in each {
            match reap_dead_owners(client).await {
                Ok(0) => {}
                Ok(n) => note!(
                    "removed {n} container(s){} left behind by runner processes that are gone",
                    named(url)
                ),
                Err(e) => note!(
                    "warning: could not reap leftover containers{}: {e}",
                    named(url)
                ),
            }
        }
    }

    /// The job's backend, its images pulled and built under `policy` on each engine.
    pub async fn backend(self, policy: ImagePolicy) -> Result<JobBackend, CliError> {
        match self {
            Engines::One(client) => Ok(JobBackend::One(DockerBackend::with_policy(client, policy))),
            Engines::Pool(pool) => {
                let members = pool
                    .into_iter()
                    .map(|(url, client)| PoolMember {
                        name: url.name(),
                        backend: DockerBackend::with_policy(client, policy.clone()),
                        max_trials: url.max_trials,
                    })
                    .collect();
                let notice: engine::pool::PoolNotice = Arc::new(|text: &str| note!("{text}"));
                let pool = EnginePool::connect(members, notice)
                    .await
                    .map_err(|e| CliError::bad_input(e.message))?;
                for (name, capacity, cap) in pool.describe() {
                    note!(
                        "engine {name}: {} CPU(s), {} MB{}",
                        capacity.cpus.map_or("?".into(), |c| c.to_string()),
                        capacity.memory_mb.map_or("?".into(), |m| m.to_string()),
                        cap.map(|n| format!(", at most {n} trial(s) at once"))
                            .unwrap_or_default()
                    );
                }
                Ok(JobBackend::Pool(pool))
            }
        }
    }
}
