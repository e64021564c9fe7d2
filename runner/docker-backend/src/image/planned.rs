//! What `runner run --dry-run` says of a task's image without pulling or building anything:
//! the reference the job would run (a prebuilt image, or the content-addressed tag its build
//! gets), by the same precedence [`crate::image::ImageService::ensure`] follows, and whether the
//! engine already has it, with its size.

use engine::{BackendError, ImageRequest, ImageSource};
use tasks::Task;

use crate::compose::main_image::{MainImage, main_image};
use crate::connect::DockerClient;
use crate::image::build_spec::BuildSpec;
use crate::image::{inspect, tagged_context};

/// How a task's image would be obtained by a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageAction {
    /// The engine has it: the run reuses it.
    Present,
    /// A prebuilt image the engine lacks: the run pulls it.
    Pull,
    /// A build the engine lacks (or `--force-build`): the run builds it.
    Build,
}

impl ImageAction {
    /// `present`, `pull` or `build`.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageAction::Present => "present",
            ImageAction::Pull => "pull",
            ImageAction::Build => "build",
        }
    }
}

/// A task's image as a run would obtain it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedImage {
    /// The image reference or build tag.
    pub reference: String,
    /// What the run would do.
    pub action: ImageAction,
    /// The image's size when the engine has it.
    pub size_bytes: Option<u64>,
}

/// `task`'s image as the engine resolved it (`request`), asking the engine only to inspect.
pub async fn planned_image(
    client: &DockerClient,
    task: &Task,
    request: &ImageRequest,
) -> Result<PlannedImage, BackendError> {
    let force_build = request.force_build;
    let build = |spec: BuildSpec| async move {
        let (tag, _) = tagged_context(task, &spec, task.short_name())?;
        let found = inspect(client, &tag).await?;
        Ok::<_, BackendError>(match found {
            Some(found) if !force_build => PlannedImage {
                reference: tag,
                action: ImageAction::Present,
                size_bytes: size(&found),
            },
            _ => PlannedImage {
                reference: tag,
                action: ImageAction::Build,
                size_bytes: None,
            },
        })
    };
    let prebuilt = |image: String| async move {
        let found = inspect(client, &image).await?;
        Ok::<_, BackendError>(PlannedImage {
            action: if found.is_some() {
                ImageAction::Present
            } else {
                ImageAction::Pull
            },
            size_bytes: found.as_ref().and_then(size),
            reference: image,
        })
    };
    match main_image(task, &request.source)? {
        MainImage::Build(spec) => build(spec).await,
        MainImage::Prebuilt { image, .. } => prebuilt(image).await,
        MainImage::Task => match &request.source {
            ImageSource::Prebuilt(image) => prebuilt(image.clone()).await,
            ImageSource::Build => build(BuildSpec::context(task.environment_dir())).await,
        },
    }
}

fn size(found: &bollard::models::ImageInspect) -> Option<u64> {
    found.size.and_then(|s| u64::try_from(s).ok())
}
