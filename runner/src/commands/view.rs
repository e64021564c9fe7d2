//! `runner view`, `runner summary` and `runner compare`: reading finished (or running) job
//! directories, runner's or Harbor's.

use std::path::PathBuf;

use viewer::ViewerError;

use crate::exit::{CliError, Family, Outcome};
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
    /// Job directories (runner's or Harbor's) to put in one report.
    #[arg(value_name = "JOB_DIR", required = true)]
    pub job_dirs: Vec<PathBuf>,
    /// Where to write the report (default: `<first job dir>/view`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Open the report in the desktop's browser when it is written.
    #[arg(long)]
    pub open: bool,
}

/// Arguments of `runner summary`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Read))]
pub struct SummaryArgs {
    /// A job directory (runner's or Harbor's).
    #[arg(value_name = "JOB_DIR")]
    pub job_dir: PathBuf,
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
pub fn view(args: ViewArgs) -> Result<Outcome, CliError> {
    let out = args.out.unwrap_or_else(|| args.job_dirs[0].join("view"));
    let report = viewer::write_report(&args.job_dirs, &out).map_err(viewer_error)?;
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
    Ok(Outcome::Success)
}

/// Runs `runner summary`.
pub fn summary(args: SummaryArgs) -> Result<Outcome, CliError> {
    let summary = viewer::summary(&args.job_dir).map_err(viewer_error)?;
    match args.format {
        TextFormat::Text => say!("{}", viewer::summary_text(&summary)),
        TextFormat::Json => say!("{}", json(&summary)?),
    }
    Ok(Outcome::Success)
}

/// Runs `runner compare`.
pub fn compare(args: CompareArgs) -> Result<Outcome, CliError> {
    let comparison = viewer::compare_jobs(&args.a, &args.b).map_err(viewer_error)?;
    match args.format {
        TextFormat::Text => say!("{}", viewer::comparison_text(&comparison)),
        TextFormat::Json => say!("{}", json(&comparison)?),
    }
    Ok(Outcome::Success)
}
