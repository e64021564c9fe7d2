//! Where the image of a compose task's `main` service comes from, by Harbor's merge.
//!
//! Harbor runs `docker compose -f <build|prebuilt> -f environment/docker-compose.yaml`
//! (`environments/docker/docker.py`), the prebuilt file when the task's `docker_image` is used
//! (`should_use_prebuilt_docker_image`: a `docker_image`, unless `--force-build` finds
//! `environment/Dockerfile`), else the build file. They give `main`:
//! - build: `build: {context: ${CONTEXT_DIR}}` with `pull_policy: build`, and Harbor runs
//!   `docker compose build` first: main is always built, from the build mapping as merged
//!   with the task file's (key by key: its `context`, `dockerfile`, `args`, `target` win);
//!   a task-file `image` only names the built image.
//! - prebuilt: `image: ${PREBUILT_IMAGE_NAME}`; the task file's `image` replaces it. A
//!   task-file `build` has no `pull_policy` there, so compose uses the image and builds
//!   only when it can be neither found nor pulled.
//!
//! Runner prepares that image once per task, through the task image's own path (cached by
//! content, labelled, its output in the trial's log), before any trial starts its services.

use std::collections::BTreeMap;

use engine::{BackendError, BackendErrorKind, ImageSource};
use tasks::Task;

use super::compose_path;
use super::file::{ComposeError, main_image_keys};
use super::service::Build;
use crate::image::build_spec::{BuildSpec, DOCKERFILE};

/// The image of `main`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MainImage {
    /// The task's own image (the engine's `ImageSource`): the compose file changes nothing.
    Task,
    /// A build other than `environment/` with its `Dockerfile`.
    Build(BuildSpec),
    /// A prebuilt image other than the task's `docker_image`, or with a build to fall back on.
    Prebuilt {
        /// The image to find or pull.
        image: String,
        /// Built when the image can be neither found nor pulled.
        fallback: Option<BuildSpec>,
    },
}

/// The image of `main` for `task` (see the module doc), given the engine's choice between
/// Harbor's build and prebuilt file (`source`); [`MainImage::Task`] when the task has no
/// compose file. A compose file that leaves `main` without an image is an error naming the
/// file and what to add.
pub fn main_image(task: &Task, source: &ImageSource) -> Result<MainImage, BackendError> {
    let Some(path) = compose_path(task) else {
        return Ok(MainImage::Task);
    };
    let fail = |kind, e: ComposeError| BackendError::new(kind, format!("task {}: {e}", task.name));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        BackendError::new(
            BackendErrorKind::Start,
            format!("task {}: reading {}: {e}", task.name, path.display()),
        )
    })?;
    let (build, image) = main_image_keys(&text, &image_variables(task))
        .map_err(|e| fail(BackendErrorKind::Unsupported, e))?;
    resolve(task, source.clone(), build, image).map_err(|e| fail(BackendErrorKind::Build, e))
}

/// The merge itself, given Harbor's choice between its build and prebuilt file (`source`).
pub(crate) fn resolve(
    task: &Task,
    source: ImageSource,
    build: Option<Build>,
    image: Option<String>,
) -> Result<MainImage, ComposeError> {
    let env_dir = task.environment_dir();
    let spec = |build: &Build| {
        build
            .spec(&env_dir)
            .map_err(|e| ComposeError::new(format!("services.main.{e}")))
    };
    match source {
        ImageSource::Prebuilt(default) => {
            // Compose only builds when the image can be neither found nor pulled, so a build
            // that could not run (a restated `${CONTEXT_DIR}` of a task without Dockerfile)
            // is no error unless it is needed; then the pull's error says why.
            let fallback = build.as_ref().and_then(|b| spec(b).ok());
            let image = image
                .map(|i| i.trim().to_owned())
                .filter(|i| !i.is_empty())
                .unwrap_or(default.clone());
            if image == default && fallback.is_none() {
                return Ok(MainImage::Task);
            }
            Ok(MainImage::Prebuilt { image, fallback })
        }
        ImageSource::Build => {
            let merged = build.unwrap_or_default();
            let no_image = || {
                let named = match &image {
                    Some(image) => format!(
                        " (services.main.image {image:?} only names the image Harbor builds when the task has no [environment] docker_image)"
                    ),
                    None => String::new(),
                };
                ComposeError::new(format!(
                    "services.main has no image: environment/ has no Dockerfile to build, [environment] docker_image is unset, and services.main.build names no other context or dockerfile{named}; add environment/Dockerfile, [environment] docker_image, or a services.main.build whose context and dockerfile exist"
                ))
            };
            let canonical = |p: &std::path::Path| p.canonicalize().ok();
            let context_is_env = canonical(&env_dir.join(merged.context())) == canonical(&env_dir);
            let default_file = merged.dockerfile.as_deref().unwrap_or(DOCKERFILE) == DOCKERFILE;
            if context_is_env && default_file && !env_dir.join(DOCKERFILE).is_file() {
                return Err(no_image());
            }
            let spec = spec(&merged)?;
            Ok(if context_is_env && spec.is_plain() {
                MainImage::Task
            } else {
                MainImage::Build(spec)
            })
        }
    }
}

/// The variables main's `build` and `image` may use when its image is prepared, before any
/// trial: Harbor's infrastructure variables of the task and its resolved `[environment].env`
/// (`CPUS` and `MEMORY` from `task.toml`, as no trial's limits exist yet).
pub(crate) fn image_variables(task: &Task) -> BTreeMap<String, String> {
    let env = &task.config.environment;
    // A template that does not resolve fails the trial's plan before its image is prepared.
    let resolved = task.resolve_env(&env.env).unwrap_or_default();
    super::infra_variables(task, resolved, env.cpus, env.memory_mb)
}
