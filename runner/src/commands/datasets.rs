//! `runner datasets list` (the datasets of a registry) and `runner datasets download` (one of
//! them as a plain dataset folder, to read or edit).

use std::path::PathBuf;

use registry::{Cache, DatasetName, RegistrySource};
use serde_json::json;

use super::dataset_source::RegistryArgs;
use super::view::TextFormat;
use crate::exit::{CliError, CommandOutcome, Family};
use crate::note;

/// `runner datasets` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum DatasetsCommand {
    /// List the registry's datasets: name, versions, task count and description.
    #[command(after_help = crate::exit::help_text(Family::Tasks))]
    List {
        /// The registry.
        #[command(flatten)]
        registry: RegistryArgs,
        /// Output format: `json` prints one `runner.datasets/v1` document.
        #[arg(long, value_enum, default_value_t = TextFormat::Text)]
        format: TextFormat,
    },
    /// Fetch a dataset's tasks (verified, through the cache) and write them as a plain
    /// dataset folder.
    #[command(after_help = crate::exit::help_text(Family::Tasks))]
    Download {
        /// NAME or NAME@VERSION.
        #[arg(value_name = "NAME[@VERSION]")]
        dataset: String,
        /// The registry.
        #[command(flatten)]
        registry: RegistryArgs,
        /// The folder to write (must not exist). Default: ./NAME@VERSION.
        #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
        output_dir: Option<PathBuf>,
    },
}

/// Runs a `runner datasets` subcommand.
pub fn run(command: DatasetsCommand) -> Result<CommandOutcome, CliError> {
    match command {
        DatasetsCommand::List { registry, format } => list(&registry.source(), format),
        DatasetsCommand::Download {
            dataset,
            registry,
            output_dir,
        } => download(&dataset, &registry.source(), output_dir),
    }
}

fn list(source: &RegistrySource, format: TextFormat) -> Result<CommandOutcome, CliError> {
    let mut tell = |line: String| note!("{line}");
    let registry = source
        .load(&Cache::from_env(), &mut tell)
        .map_err(CliError::bad_input)?;
    let rows: Vec<(&str, Vec<&str>, usize, &str)> = registry
        .names()
        .into_iter()
        .map(|name| {
            let specs: Vec<_> = registry
                .datasets
                .iter()
                .filter(|d| d.name == name)
                .collect();
            let picked = registry::version::resolve_version(&registry.versions(name));
            let shown = specs
                .iter()
                .find(|d| Some(d.version.as_str()) == picked)
                .unwrap_or(&specs[0]);
            (
                name,
                registry.versions(name),
                shown.tasks.len(),
                shown.description.as_str(),
            )
        })
        .collect();
    if format == TextFormat::Json {
        let datasets: Vec<_> = registry
            .datasets
            .iter()
            .map(|d| json!({"name": d.name, "version": d.version, "task_count": d.tasks.len(), "description": d.description}))
            .collect();
        let doc = json!({"schema": "runner.datasets/v1", "registry": registry.origin, "datasets": datasets});
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(CommandOutcome::Success);
    }
    println!(
        "{:<28} {:<24} {:>6}  DESCRIPTION",
        "NAME", "VERSIONS", "TASKS"
    );
    for (name, versions, tasks, description) in rows {
        let description = description.lines().next().unwrap_or("");
        println!(
            "{name:<28} {:<24} {tasks:>6}  {description}",
            versions.join(", ")
        );
    }
    Ok(CommandOutcome::Success)
}

fn download(
    text: &str,
    source: &RegistrySource,
    output_dir: Option<PathBuf>,
) -> Result<CommandOutcome, CliError> {
    let wanted = DatasetName::parse(text).map_err(CliError::bad_input)?;
    let resolved = super::dataset_source::resolve(source, &wanted)?;
    let out = output_dir
        .unwrap_or_else(|| PathBuf::from(format!("{}@{}", resolved.name, resolved.version)));
    registry::view::download(&resolved.name, &resolved.tasks, &out).map_err(CliError::bad_input)?;
    println!("{}", out.display());
    note!(
        "wrote {} task(s) of {}@{} to {}",
        resolved.tasks.len(),
        resolved.name,
        resolved.version,
        out.display()
    );
    Ok(CommandOutcome::Success)
}
