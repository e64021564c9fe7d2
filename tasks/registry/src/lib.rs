//! Datasets by name (`runner run -d terminal-bench@2.0`): Harbor's JSON registries
//! ([`model`], [`source`]), Harbor's version rule ([`version`], [`reference`]), tasks fetched
//! at their pinned commits through the system git ([`git`], [`fetch`]) into a cache verified
//! by content digest on every use ([`cache`], [`digest`]), and the plain dataset directory the
//! rest of the runner reads ([`view`]).

pub mod cache;
mod copy;
pub mod digest;
pub mod error;
pub mod fetch;
pub mod git;
pub mod model;
pub mod reference;
pub mod source;
pub mod version;
pub mod view;

use std::path::PathBuf;

pub use cache::Cache;
pub use error::RegistryError;
pub use fetch::ResolvedTask;
pub use model::{DatasetSpec, Registry, RegistryTask};
pub use reference::DatasetName;
pub use source::{DEFAULT_REGISTRY_URL, RegistrySource};

/// A dataset resolved by name: its registry entry, its tasks on this machine, and the
/// dataset directory to run.
#[derive(Debug, Clone)]
pub struct ResolvedDataset {
    /// The dataset's name.
    pub name: String,
    /// The version resolved (the one picked when none was asked for).
    pub version: String,
    /// The registry it came from.
    pub registry: RegistrySource,
    /// Its tasks, in registry order.
    pub tasks: Vec<ResolvedTask>,
    /// A plain dataset directory of the tasks (see [`view`]).
    pub dir: PathBuf,
}

impl ResolvedDataset {
    /// The task whose directory in [`ResolvedDataset::dir`] is named `dir_name`.
    pub fn task_by_dir_name(&self, dir_name: &str) -> Option<&ResolvedTask> {
        view::dir_names(&self.tasks)
            .iter()
            .position(|n| n == dir_name)
            .map(|i| &self.tasks[i])
    }
}

/// Resolves `wanted` in the registry at `source`: reads the registry, picks the version,
/// verifies or fetches every task, and makes the dataset directory. Progress and fallbacks
/// are told through `note`.
pub fn resolve(
    source: &RegistrySource,
    wanted: &DatasetName,
    cache: &Cache,
    note: &mut dyn FnMut(String),
) -> Result<ResolvedDataset, RegistryError> {
    let registry = source.load(cache, note)?;
    let spec = wanted.pick(&registry)?;
    if spec.tasks.is_empty() {
        return Err(RegistryError::Empty(format!(
            "{}@{}",
            spec.name, spec.version
        )));
    }
    let tasks = fetch::fetch_all(&spec.tasks, cache, note)?;
    let dir = view::make(cache, &spec.name, &spec.version, &tasks)?;
    Ok(ResolvedDataset {
        name: spec.name.clone(),
        version: spec.version.clone(),
        registry: source.clone(),
        tasks,
        dir,
    })
}
