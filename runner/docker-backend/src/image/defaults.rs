//! What a container inherits from its image when the runner sets nothing: the default user
//! and working directory, and whether an entrypoint runs at its start. The verifier jail
//! copies the first two from the trial's image; they are
//! cached per image id, which names the image's content, so an entry is never stale and
//! every trial after a task's first skips the inspection.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::connect::DockerClient;
use crate::error::DockerError;

/// An image's defaults for containers made from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ImageDefaults {
    /// `USER` of the image; `None` when it sets none (root).
    pub user: Option<String>,
    /// `WORKDIR` of the image; `None` when it sets none (`/`).
    pub working_dir: Option<String>,
    /// The image has an `ENTRYPOINT`: a process of the image's runs from the container's
    /// start, before the runner's keep-alive command.
    pub entrypoint: bool,
}

fn cache() -> &'static Mutex<HashMap<String, ImageDefaults>> {
    static CACHE: OnceLock<Mutex<HashMap<String, ImageDefaults>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The defaults of the image `id`, inspected once per process.
pub(crate) async fn of(client: &DockerClient, id: &str) -> Result<ImageDefaults, DockerError> {
    if let Some(known) = cache().lock().ok().and_then(|c| c.get(id).cloned()) {
        return Ok(known);
    }
    let inspected = client
        .api()
        .inspect_image(id)
        .await
        .map_err(|e| DockerError::api(format!("inspecting image {id}"), e))?;
    let config = inspected.config.unwrap_or_default();
    let defaults = ImageDefaults {
        user: config.user.filter(|u| !u.is_empty()),
        working_dir: config.working_dir.filter(|w| !w.is_empty()),
        entrypoint: config.entrypoint.is_some_and(|e| !e.is_empty()),
    };
    if let Ok(mut known) = cache().lock() {
        known.insert(id.to_owned(), defaults.clone());
    }
    Ok(defaults)
}
