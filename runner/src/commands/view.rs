//! `runner view`, `runner summary` and `runner compare`: reading finished (or running) job
//! directories, runner's or Harbor's.

use std::path::PathBuf;

use viewer::ViewerError;

use crate::exit::{CliError, CommandOutcome, Family};
use crate::say;

/// Output format of `summary` and `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TextFormat {
    /// A readable table.
    Text,
    /// A JSON document (`runner.summary/v1`, `runner.compare/v1`; see docs/statistics.md).
    Json,
}

/// Arguments of `runner view`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Read))]
pub struct ViewArgs {
    /// Job directories (runner's or Harbor's) to put in one report, side by side (one job
    /// with --as-one).
    #[arg(value_name = "JOB_DIR", required = true)]
    pub job_dirs: Vec<PathBuf>,
    /// Where to write the report (default: `<first job dir>/view`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Open the report in the desktop's browser when it is written.
    #[arg(long)]
    pub open: bool,
    /// Read the job directories as one job (the shards of a `run --shard I/N` split, or a job
    /// and a re-run of some of its trials): each trial counted once.
    #[arg(long)]
    pub as_one: bool,
}

/// Arguments of `runner summary`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Read))]
pub struct SummaryArgs {
    /// A job directory (runner's or Harbor's); several are read as one job (the shards of a
    /// `run --shard I/N` split, or a job and a re-run of some of its trials), each trial
    /// counted once.
    #[arg(value_name = "JOB_DIR", required = true)]
    pub job_dirs: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TextFormat::Text)]
    pub format: TextFormat,
}

/// Arguments of `runner compare`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Read))]
pub struct CompareArgs {
    /// The baseline job directory.
    #[arg(value_name = "JOB_A")]
    pub a: PathBuf,
    /// The job directory compared with it (differences are B − A).
    #[arg(value_name = "JOB_B")]
    pub b: PathBuf,
    /// Another job directory read as part of job A (e.g. its other shards); repeatable.
    #[arg(long = "with-a", value_name = "JOB_DIR")]
    pub with_a: Vec<PathBuf>,
    /// Another job directory read as part of job B (e.g. its other shards); repeatable.
    #[arg(long = "with-b", value_name = "JOB_DIR")]
    pub with_b: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TextFormat::Text)]
    pub format: TextFormat,
}

fn viewer_error(error: ViewerError) -> CliError {
    match error {
        ViewerError::Io { .. } => CliError::runner(error),
        _ => CliError::bad_input(error),
    }
}

fn json(value: &impl serde::Serialize) -> Result<String, CliError> {
    serde_json::to_string_pretty(value).map_err(CliError::runner)
}

/// Runs `runner view`.
pub fn view(args: ViewArgs) -> Result<CommandOutcome, CliError> {
    let out = args.out.unwrap_or_else(|| args.job_dirs[0].join("view"));
    let groups: Vec<Vec<PathBuf>> = if args.as_one {
        vec![args.job_dirs.clone()]
    } else {
        args.job_dirs.iter().map(|d| vec![d.clone()]).collect()
    };
    let report = viewer::write_report_groups(&groups, &out).map_err(viewer_error)?;
    say!(
        "{} ({} job(s), {} trial page(s))",
        report.index.display(),
        report.jobs,
        report.trial_pages
    );
    if args.open {
        // Best effort: a headless machine has no browser to open, and the path is printed.
        let _ = std::process::Command::new("xdg-open")
            .arg(&report.index)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    Ok(CommandOutcome::Success)
}

/// Runs `runner summary`.
pub fn summary(args: SummaryArgs) -> Result<CommandOutcome, CliError> {
    let summary = viewer::summary_of(&args.job_dirs).map_err(viewer_error)?;
    match args.format {
        TextFormat::Text => say!("{}", viewer::summary_text(&summary)),
        TextFormat::Json => say!("{}", json(&summary)?),
    }
    Ok(CommandOutcome::Success)
}

/// Runs `runner compare`.
pub fn compare(args: CompareArgs) -> Result<CommandOutcome, CliError> {
    let a: Vec<PathBuf> = std::iter::once(args.a).chain(args.with_a).collect();
    let b: Vec<PathBuf> = std::iter::once(args.b).chain(args.with_b).collect();
    let comparison = viewer::compare_job_sets(&a, &b).map_err(viewer_error)?;
    match args.format {
        TextFormat::Text => say!("{}", viewer::comparison_text(&comparison)),
        TextFormat::Json => say!("{}", json(&comparison)?),
    }
    Ok(CommandOutcome::Success)
}
