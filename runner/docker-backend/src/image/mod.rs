//! Task images, from where the engine resolved them (`engine::ImageRequest`, by Harbor's
//! precedence in `engine::image_source`): the prebuilt `docker_image` (pulled once per job
//! when the engine lacks it, shared by every task naming it), or a BuildKit build of
//! `environment/` under a content-addressed tag, so a later job with the same environment
//! reuses it. Before any pull or build the engine's data root is checked
//! against the free-space watermark; what runner pulled or built is recorded in the ledger
//! for `runner images prune`.

pub(crate) mod auth;
pub(crate) mod base_images;
pub(crate) mod build_spec;
pub(crate) mod buildkit;
pub(crate) mod buildkit_status;
pub(crate) mod defaults;
pub(crate) mod ledger;
pub(crate) mod planned;
pub(crate) mod prune;
pub(crate) mod pull;
pub(crate) mod rate;
pub(crate) mod reference;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bollard::auth::DockerCredentials;
use bollard::models::ImageInspect;
use engine::{BackendError, ImageInfo, ImageOrigin, ImageRequest, ImageSource, OutputSink};
use tasks::Task;
use tokio::sync::OnceCell;

use crate::compose::main_image::{MainImage, main_image};
use crate::connect::DockerClient;
use crate::error::DockerError;
use crate::facts::{EngineFacts, check_disk};
use crate::image::auth::{DockerConfig, config_path};
use crate::image::base_images::base_images;
use crate::image::build_spec::BuildSpec;
use crate::image::buildkit::{BuildFailure, BuildRequest, NEEDS_SESSION, build};
use crate::image::ledger::{Ledger, LedgerOrigin, default_state_dir};
use crate::image::pull::{PullRetryPolicy, pull};
use crate::image::rate::RateLimiter;
use crate::image::reference::ImageRef;
use crate::labels::{MANAGED, TASK};

/// How images are obtained: pull rate, retries, the disk watermark and the ledger's place.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePolicy {
    /// Pull attempts started per minute at most (retries count).
    pub pulls_per_minute: u32,
    /// Retries of a pull.
    pub retry: PullRetryPolicy,
    /// No build or pull starts while the engine's data root has less free than this.
    pub min_free_disk_bytes: u64,
    /// Where the ledger of runner's images lives (`None`: not recorded).
    pub state_dir: Option<PathBuf>,
}

/// Default pull-rate limit: well under the 100 a minute registries allow.
pub const DEFAULT_PULLS_PER_MINUTE: u32 = 60;
/// Default free-space watermark in MB (10^6 bytes).
pub const DEFAULT_MIN_FREE_DISK_MB: u64 = 4096;

impl Default for ImagePolicy {
    fn default() -> Self {
        Self {
            pulls_per_minute: DEFAULT_PULLS_PER_MINUTE,
            retry: PullRetryPolicy::default(),
            min_free_disk_bytes: DEFAULT_MIN_FREE_DISK_MB * 1_000_000,
            state_dir: default_state_dir(),
        }
    }
}

type SharedPull = Arc<OnceCell<Result<ImageInfo, BackendError>>>;

/// The images of one backend (one job, or one `runner images pull`): the pull-rate limiter,
/// the pulls in flight or done by image reference, and the engine's facts.
pub struct ImageService {
    client: DockerClient,
    policy: ImagePolicy,
    limiter: RateLimiter,
    facts: OnceCell<EngineFacts>,
    pulls: Mutex<HashMap<String, SharedPull>>,
    ledger: Option<Ledger>,
}

impl ImageService {
    /// A service over `client` with `policy`.
    pub fn new(client: DockerClient, policy: ImagePolicy) -> Self {
        Self {
            limiter: RateLimiter::per_minute(policy.pulls_per_minute),
            ledger: policy.state_dir.as_deref().map(Ledger::new),
            client,
            policy,
            facts: OnceCell::new(),
            pulls: Mutex::new(HashMap::new()),
        }
    }

    /// Makes the image of `task` available (see the module doc). A compose task's
    /// `services.main` may change where it comes from (`compose::main_image`, Harbor's merge of
    /// its build or prebuilt file with the task's): a build of the context and Dockerfile the
    /// task file names, or another prebuilt image.
    pub async fn ensure(
        &self,
        task: &Task,
        request: &ImageRequest,
        log: &OutputSink,
    ) -> Result<ImageInfo, BackendError> {
        let force_build = request.force_build;
        if let Some(image) = self
            .compose_main(task, main_image(task, &request.source)?, force_build, log)
            .await
        {
            return image;
        }
        match &request.source {
            ImageSource::Prebuilt(image) => self.prebuilt(task, image, log).await,
            ImageSource::Build => Ok(self
                .build(
                    task,
                    &BuildSpec::context(task.environment_dir()),
                    task.short_name(),
                    force_build,
                    log,
                )
                .await?),
        }
    }

    /// Main's image when the compose file decides it (`None`: the task's own image).
    async fn compose_main(
        &self,
        task: &Task,
        main: MainImage,
        force_build: bool,
        log: &OutputSink,
    ) -> Option<Result<ImageInfo, BackendError>> {
        let env_dir = task.environment_dir();
        let from_file = "environment/docker-compose.yaml";
        let say = |text: String| log("runner", text.as_bytes());
        match main {
            MainImage::Task => None,
            MainImage::Build(spec) => {
                say(format!(
                    "main's image: services.main.build of {from_file} ({})\n",
                    spec.describe(&env_dir)
                ));
                let built = self.build(task, &spec, task.short_name(), force_build, log);
                Some(built.await.map_err(BackendError::from))
            }
            MainImage::Prebuilt { image, fallback } => {
                say(format!(
                    "main's image: {image} (services.main of {from_file})\n"
                ));
                let pulled = self.prebuilt(task, &image, log).await;
                let (Err(e), Some(spec)) = (&pulled, fallback) else {
                    return Some(pulled);
                };
                // Compose, given `image` and `build`, builds when the image cannot be pulled.
                say(format!(
                    "{e}; building services.main.build instead ({})\n",
                    spec.describe(&env_dir)
                ));
                let built = self.build(task, &spec, task.short_name(), force_build, log);
                Some(built.await.map_err(BackendError::from))
            }
        }
    }

    /// An image other than the task's own: the prebuilt `docker_image` when given, else the
    /// build `spec` tagged `runner-task-<name>:<sha16>` (a compose sidecar's build, the
    /// separate verifier's `tests/`). Builds are reused by content like the task's.
    pub async fn ensure_other(
        &self,
        task: &Task,
        docker_image: Option<&str>,
        spec: &BuildSpec,
        name: &str,
        log: &OutputSink,
    ) -> Result<ImageInfo, BackendError> {
        match docker_image.map(str::trim).filter(|i| !i.is_empty()) {
            Some(image) => self.prebuilt(task, image, log).await,
            None => Ok(self.build(task, spec, name, false, log).await?),
        }
    }

    /// The engine's facts, asked once per process.
    pub(crate) async fn facts(&self) -> Result<&EngineFacts, DockerError> {
        self.facts
            .get_or_try_init(|| EngineFacts::read(&self.client))
            .await
    }

    /// The prebuilt image `written`, pulled at most once per service whatever the number of
    /// tasks naming it.
    async fn prebuilt(
        &self,
        task: &Task,
        written: &str,
        log: &OutputSink,
    ) -> Result<ImageInfo, BackendError> {
        let image = ImageRef::parse(written).map_err(|source| DockerError::BadReference {
            task: task.name.clone(),
            source,
        })?;
        let cell = self
            .pulls
            .lock()
            .expect("not poisoned")
            .entry(written.to_owned())
            .or_default()
            .clone();
        let mut prepared_here = false;
        let outcome = cell
            .get_or_init(|| {
                prepared_here = true;
                async { Ok(self.obtain(&image, written, log).await?) }
            })
            .await
            .clone();
        if !prepared_here && outcome.is_ok() {
            log(
                "runner",
                format!("image {written}: already prepared by this job for another task\n")
                    .as_bytes(),
            );
        }
        outcome
    }

    async fn obtain(
        &self,
        image: &ImageRef,
        written: &str,
        log: &OutputSink,
    ) -> Result<ImageInfo, DockerError> {
        let facts = self.facts().await?.clone();
        if let Some(found) = inspect(&self.client, written).await? {
            self.record_use(written, &found, None, log).await;
            return Ok(image_info(written, found, ImageOrigin::Reused, &facts));
        }
        check_disk(
            &facts,
            self.policy.min_free_disk_bytes,
            &format!("pulling {written}"),
        )?;
        let credentials = self.credentials(image, written, &facts).await?;
        log(
            "runner",
            format!(
                "pulling {written} ({})\n",
                if credentials.is_some() {
                    "with credentials from the Docker config"
                } else {
                    "anonymously"
                }
            )
            .as_bytes(),
        );
        let started = Instant::now();
        let stats = pull(
            &self.client,
            image,
            written,
            credentials,
            &self.limiter,
            &self.policy.retry,
            log,
        )
        .await?;
        let found = inspect(&self.client, written)
            .await?
            .ok_or_else(|| DockerError::Pull {
                image: written.to_owned(),
                attempts: stats.attempts,
                answer: "the pull ended but the engine has no such image".into(),
            })?;
        log(
            "runner",
            format!(
                "pulled {written} in {:.1}s ({} attempt(s)): {} layers, {} already present, {:.1} MB downloaded, manifest {}\n",
                started.elapsed().as_secs_f64(),
                stats.attempts,
                stats.layers,
                stats.layers_present,
                stats.bytes_downloaded as f64 / 1e6,
                stats.digest.as_deref().unwrap_or("unknown")
            )
            .as_bytes(),
        );
        self.record_use(written, &found, Some(LedgerOrigin::Pulled), log)
            .await;
        Ok(image_info(written, found, ImageOrigin::Pulled, &facts))
    }

    /// Credentials for `image`'s registry from the Docker config; the default registry's are
    /// keyed by the engine's index address, as the Docker client keys them.
    async fn credentials(
        &self,
        image: &ImageRef,
        written: &str,
        facts: &EngineFacts,
    ) -> Result<Option<DockerCredentials>, DockerError> {
        let Some(server) = image
            .registry
            .clone()
            .or_else(|| facts.index_server.clone())
        else {
            return Ok(None);
        };
        let Some(path) = config_path() else {
            return Ok(None);
        };
        let auth_error = |source| DockerError::Auth {
            image: written.to_owned(),
            source,
        };
        let config = DockerConfig::read(&path).map_err(auth_error)?;
        let found = config.credentials(&server).await.map_err(auth_error)?;
        Ok(found.map(|auth| auth.for_engine(&server)))
    }

    /// Builds `spec` with BuildKit under its content-addressed tag, or reuses that tag unless
    /// the build is forced. A forced build still uses BuildKit's cache, as Harbor's
    /// `--force-build` (`docker compose build`) does; it always runs, so the lock says `built`.
    async fn build(
        &self,
        task: &Task,
        spec: &BuildSpec,
        name: &str,
        force_build: bool,
        log: &OutputSink,
    ) -> Result<ImageInfo, DockerError> {
        let env_dir = spec.context.as_path();
        let (tag, context) = tagged_context(task, spec, name)?;
        let facts = self.facts().await?.clone();
        if !force_build && let Some(found) = inspect(&self.client, &tag).await? {
            self.record_use(&tag, &found, None, log).await;
            return Ok(image_info(&tag, found, ImageOrigin::Reused, &facts));
        }
        check_disk(
            &facts,
            self.policy.min_free_disk_bytes,
            &format!("building the image of task {}", task.name),
        )?;
        let endpoint = self.client.endpoint().map_err(|e| DockerError::Build {
            task: task.name.clone(),
            message: e.to_string(),
        })?;
        log(
            "runner",
            format!(
                "building {tag} with BuildKit ({} KB of context)\n",
                context.len() / 1000
            )
            .as_bytes(),
        );
        let started = Instant::now();
        let labels = HashMap::from([(MANAGED, "1"), (TASK, task.name.as_str())]);
        let context = bytes::Bytes::from(context);
        let request = || BuildRequest {
            tag: &tag,
            labels: &labels,
            context: context.clone(),
            dockerfile: &spec.dockerfile,
            build_args: &spec.args,
            target: spec.target.as_deref(),
        };
        let failed = |failure: BuildFailure| DockerError::Build {
            task: task.name.clone(),
            message: failure.message(),
        };
        match build(&endpoint, request(), log).await {
            Ok(()) => {}
            Err(failure) if failure.error.contains(NEEDS_SESSION) => {
                self.pull_bases(task, &env_dir.join(&spec.dockerfile), log)
                    .await?;
                build(&endpoint, request(), log).await.map_err(failed)?;
            }
            Err(failure) => return Err(failed(failure)),
        }
        let found = inspect(&self.client, &tag)
            .await?
            .ok_or_else(|| DockerError::Build {
                task: task.name.clone(),
                message: format!("the build finished but {tag} does not exist"),
            })?;
        log(
            "runner",
            format!("built {tag} in {:.1}s\n", started.elapsed().as_secs_f64()).as_bytes(),
        );
        self.record_use(&tag, &found, Some(LedgerOrigin::Built), log)
            .await;
        Ok(image_info(&tag, found, ImageOrigin::Built, &facts))
    }

    /// Pulls the literal base images of the Dockerfile at `path` with the Docker config's
    /// credentials, for a build whose base BuildKit could not fetch without a session.
    async fn pull_bases(
        &self,
        task: &Task,
        path: &std::path::Path,
        log: &OutputSink,
    ) -> Result<(), DockerError> {
        let text = std::fs::read_to_string(path).map_err(|source| DockerError::Io {
            operation: format!("reading {}", path.display()),
            source,
        })?;
        let bases = base_images(&text);
        log(
            "runner",
            format!(
                "the build needs registry credentials for its base image(s); pulling {} first\n",
                bases.join(", ")
            )
            .as_bytes(),
        );
        for base in bases {
            self.prebuilt(task, &base, log)
                .await
                .map_err(|e| DockerError::Build {
                    task: task.name.clone(),
                    message: format!("its base image {base} could not be pulled: {e}"),
                })?;
        }
        Ok(())
    }

    /// Notes the use in the ledger; a ledger that cannot be written costs only pruning, so it
    /// is logged, not fatal.
    async fn record_use(
        &self,
        reference: &str,
        found: &ImageInspect,
        origin: Option<LedgerOrigin>,
        log: &OutputSink,
    ) {
        let (Some(ledger), Some(id)) = (self.ledger.clone(), found.id.clone()) else {
            return;
        };
        let reference = reference.to_owned();
        let recorded =
            tokio::task::spawn_blocking(move || ledger.record_use(&reference, &id, origin)).await;
        if let Ok(Err(e)) = recorded {
            log(
                "runner",
                format!("warning: the image ledger could not be updated: {e}\n").as_bytes(),
            );
        }
    }
}

fn image_info(
    reference: &str,
    found: ImageInspect,
    origin: ImageOrigin,
    facts: &EngineFacts,
) -> ImageInfo {
    ImageInfo {
        tag: reference.to_owned(),
        id: found.id.unwrap_or_default(),
        origin,
        repo_digests: found.repo_digests.unwrap_or_default(),
        engine_version: facts.version.clone(),
        size_bytes: found.size.and_then(|s| u64::try_from(s).ok()),
    }
}

/// The build context of `spec` packed, and the content-addressed tag its build gets:
/// `runner-task-<name>:<sha16>` of the context, Dockerfile, arguments and target.
pub(crate) fn tagged_context(
    task: &Task,
    spec: &BuildSpec,
    name: &str,
) -> Result<(String, Vec<u8>), DockerError> {
    let env_dir = spec.context.as_path();
    let context =
        provenance::build_context(env_dir, &spec.dockerfile).map_err(|e| DockerError::Build {
            task: task.name.clone(),
            message: format!("packing {} as a build context: {e}", env_dir.display()),
        })?;
    let tag = format!("runner-task-{}:{}", sanitize(name), spec.digest(&context));
    Ok((tag, context))
}

/// The engine's view of `image`, or `None` when it does not have it.
pub(crate) async fn inspect(
    client: &DockerClient,
    image: &str,
) -> Result<Option<ImageInspect>, DockerError> {
    match client.api().inspect_image(image).await {
        Ok(inspect) => Ok(Some(inspect)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(source) => Err(DockerError::api(
            format!("inspecting image {image}"),
            source,
        )),
    }
}

/// Lowercases and replaces anything outside `[a-z0-9._-]` with `-`, as Docker names require.
pub fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_makes_docker_safe_names() {
        assert_eq!(sanitize("Hello World/Task_1"), "hello-world-task_1");
        assert_eq!(sanitize("-x-"), "x");
    }
}
