//! `-d/--dataset NAME[@VERSION]` with `--registry-url`/`--registry-path`: a dataset by name
//! (Harbor's flags), resolved to a plain local dataset directory before the command's own
//! code runs, so everything after sees a `--path` as before (see the `registry` crate).

use std::path::PathBuf;

use registry::{Cache, DatasetName, RegistrySource, ResolvedDataset};

use crate::exit::CliError;
use crate::note;

/// Which registry (Harbor's flags): for `-d`, `runner datasets` and
/// `validate-submission --dataset NAME@VERSION`.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct RegistryArgs {
    /// The JSON registry (registry.json) to read datasets by name from, by URL (http(s)://
    /// or file://). Default: Harbor's public registry.
    #[arg(
        long,
        value_name = "URL",
        env = "RUNNER_REGISTRY_URL",
        conflicts_with = "registry_path"
    )]
    pub registry_url: Option<String>,
    /// The JSON registry (registry.json) to read datasets by name from, as a file.
    #[arg(long, value_name = "FILE", env = "RUNNER_REGISTRY_PATH")]
    pub registry_path: Option<PathBuf>,
}

impl RegistryArgs {
    /// The registry these flags name (Harbor's public one when neither is given).
    pub fn source(&self) -> RegistrySource {
        match (&self.registry_url, &self.registry_path) {
            (_, Some(path)) => RegistrySource::Path(path.clone()),
            (Some(url), None) => RegistrySource::Url(url.clone()),
            (None, None) => RegistrySource::default(),
        }
    }
}

/// The flags that name a dataset in a registry.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct DatasetSourceArgs {
    /// A dataset by name from a registry, NAME or NAME@VERSION (e.g. terminal-bench@2.0);
    /// without a version, Harbor's pick (`head`, else the highest). Its tasks are fetched at
    /// their pinned commits into the cache (RUNNER_CACHE_DIR, default ~/.cache/runner),
    /// verified on every use. Instead of --path.
    #[arg(
        short = 'd',
        long = "dataset",
        value_name = "NAME[@VERSION]",
        env = "RUNNER_DATASET",
        conflicts_with = "path"
    )]
    pub dataset: Option<String>,
    /// The registry -d reads.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl DatasetSourceArgs {
    /// Resolves `-d`, if given: every task verified or fetched, the dataset directory made.
    /// Every failure is bad input (exit 2), before anything runs.
    pub fn resolve(&self) -> Result<Option<ResolvedDataset>, CliError> {
        let Some(text) = &self.dataset else {
            return Ok(None);
        };
        let wanted = DatasetName::parse(text).map_err(CliError::bad_input)?;
        resolve(&self.registry.source(), &wanted).map(Some)
    }

    /// The dataset directory a command reads: `-d`'s, resolved, or else `path` (clap requires
    /// one of them).
    pub fn dir_or(&self, path: Option<PathBuf>) -> Result<PathBuf, CliError> {
        match self.resolve()? {
            Some(resolved) => Ok(resolved.dir),
            None => path.ok_or_else(|| {
                CliError::bad_input("give a task or dataset directory, or -d NAME[@VERSION]")
            }),
        }
    }
}

/// Resolves `wanted` in `registry`, telling progress as notes.
pub fn resolve(
    registry: &RegistrySource,
    wanted: &DatasetName,
) -> Result<ResolvedDataset, CliError> {
    let cache = Cache::from_env();
    let mut tell = |line: String| note!("{line}");
    let resolved =
        registry::resolve(registry, wanted, &cache, &mut tell).map_err(CliError::bad_input)?;
    note!(
        "dataset {}@{}: {} task(s) from {}",
        resolved.name,
        resolved.version,
        resolved.tasks.len(),
        resolved.registry
    );
    Ok(resolved)
}
