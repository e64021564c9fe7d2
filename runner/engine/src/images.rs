//! Which image a task runs in, by Harbor's rule ([`image_source`], the [`ImageRequest`] a
//! backend gets). Its preparation, once per task per job, is `image_cache.rs`; the prefetch
//! that pulls the prebuilt images of later tasks while early trials run is `job/prefetch.rs`.
//! This module needs nothing else of the engine, so the `Backend` trait can name it.
//!
//! Harbor (`should_use_prebuilt_docker_image` in `environments/definition.py`): a task that
//! names a `docker_image` runs that image unless `--force-build` is given; with
//! `--force-build` it is built from `environment/Dockerfile` when there is one, and still runs
//! the prebuilt image when there is not. A task without `docker_image` is always built.
//!
//! Pull time counts against the environment deadline, as in Harbor: Harbor pulls inside
//! `environment.start()` (`docker compose up`), which the trial bounds by
//! `build_timeout_sec × environment_build_timeout_multiplier` and reports as
//! `EnvironmentStartTimeoutError`. The engine bounds the preparation of the shared image by the
//! same deadline (see `image_cache.rs`), whether a trial or the prefetch started it.

use tasks::Task;

/// Where a task's image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    /// The task's prebuilt `docker_image`, pulled when the engine does not have it.
    Prebuilt(String),
    /// A build of `environment/Dockerfile`.
    Build,
}

/// Harbor's precedence between a task's `docker_image` and its Dockerfile.
pub fn image_source(task: &Task, force_build: bool) -> ImageSource {
    match &task.config.environment.docker_image {
        Some(image)
            if !image.trim().is_empty()
                && (!force_build || !task.environment_dir().join("Dockerfile").is_file()) =>
        {
            ImageSource::Prebuilt(image.trim().to_owned())
        }
        _ => ImageSource::Build,
    }
}

/// What a backend is asked to make ready for a task ([`crate::Backend::prepare_image`]): the
/// engine's own resolution of where the image comes from, so no backend decides it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    /// Where the image comes from, by Harbor's precedence ([`image_source`]).
    pub source: ImageSource,
    /// `--force-build`: a build runs even when the same content was built before.
    pub force_build: bool,
}

impl ImageRequest {
    /// The request for `task` under `--force-build` (`force_build`).
    pub fn for_task(task: &Task, force_build: bool) -> ImageRequest {
        ImageRequest {
            source: image_source(task, force_build),
            force_build,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(docker_image: Option<&str>, dockerfile: bool) -> (tempfile::TempDir, Task) {
        let dir = tempfile::tempdir().unwrap();
        let toml = docker_image
            .map(|image| format!("[environment]\ndocker_image = \"{image}\""))
            .unwrap_or_default();
        let task = testkit::TaskFixture::new("t/x")
            .toml(&toml)
            .write(dir.path());
        if !dockerfile {
            std::fs::remove_file(dir.path().join("environment/Dockerfile")).unwrap();
        }
        (dir, task)
    }

    /// Harbor's `test_should_use_prebuilt_docker_image` cases.
    #[test]
    fn harbor_precedence_between_docker_image_and_dockerfile() {
        let prebuilt = ImageSource::Prebuilt("img:1".into());
        let (_d, both) = task(Some("img:1"), true);
        assert_eq!(image_source(&both, false), prebuilt);
        assert_eq!(image_source(&both, true), ImageSource::Build);
        let (_d, image_only) = task(Some("img:1"), false);
        assert_eq!(image_source(&image_only, false), prebuilt);
        assert_eq!(image_source(&image_only, true), prebuilt);
        let (_d, dockerfile_only) = task(None, true);
        assert_eq!(image_source(&dockerfile_only, false), ImageSource::Build);
        assert_eq!(image_source(&dockerfile_only, true), ImageSource::Build);
    }
}
