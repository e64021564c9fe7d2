//! `runner tasks check PATH`: each task of a task or dataset directory judged before anyone
//! pays for a run. Static rules (`tasks::lint`) and real trials through the engine: the oracle
//! scores 1 every time, the nop agent 0, reward-hack probes 0, no answer leaks.

mod judge;
mod probes;
mod report;
mod stage;
mod trials;
mod verdicts;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use docker_backend::{DockerBackend, DockerClient};
use tasks::Dataset;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use report::CheckName;
use report::TaskReport;

use crate::exit::{CliError, CommandOutcome, Family};
use crate::{note, say};

/// Output formats of `tasks check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    /// A table of tasks × checks, then each reason.
    Text,
    /// One `runner.task-check/v1` document.
    Json,
    /// GitHub workflow annotations (`::error file=...::`) on the tasks' files.
    Github,
}

/// Arguments of `runner tasks check`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Check))]
pub struct CheckArgs {
    /// A task directory or a dataset directory (or -d NAME[@VERSION]).
    #[arg(required_unless_present = "dataset")]
    pub path: Option<PathBuf>,
    /// -d/--dataset NAME[@VERSION] with --registry-url/--registry-path: a dataset by name.
    #[command(flatten)]
    pub source: crate::commands::dataset_source::DatasetSourceArgs,
    /// Oracle trials per task: a task that scores 1 only sometimes is flaky.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// Trials run at once (all tasks and checks together).
    #[arg(short = 'n', long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub n_concurrent: u32,
    /// Only these checks (comma-separated or repeated; default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub checks: Vec<CheckName>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    pub format: CheckFormat,
    /// Keep the check's job directories here (default: a temporary directory, removed).
    #[arg(long, value_name = "DIR")]
    pub jobs_dir: Option<PathBuf>,
}

/// Runs `runner tasks check`.
pub fn run(args: CheckArgs) -> Result<CommandOutcome, CliError> {
    // A dataset by name becomes its verified local directory before the runtime starts.
    let path = args.source.dir_or(args.path.clone())?;
    crate::commands::block_on(run_async(args, path))
}

async fn run_async(args: CheckArgs, path: PathBuf) -> Result<CommandOutcome, CliError> {
    let dataset = Dataset::read(&path).map_err(CliError::bad_input)?;
    if dataset.tasks.is_empty() && dataset.skipped.is_empty() {
        return Err(CliError::bad_input(super::digest::no_task_message(
            &dataset,
        )));
    }
    let selected: Vec<CheckName> = if args.checks.is_empty() {
        CheckName::ALL.to_vec()
    } else {
        args.checks.clone()
    };
    let scratch = tempfile::tempdir().map_err(CliError::runner)?;
    let jobs_dir = match &args.jobs_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                CliError::bad_input_because(format!("--jobs-dir {}", dir.display()), e)
            })?;
            std::path::absolute(dir).map_err(CliError::runner)?
        }
        None => scratch.path().to_path_buf(),
    };
    let dynamic = selected.iter().any(|c| {
        matches!(
            c,
            CheckName::Oracle | CheckName::Nop | CheckName::Hacks | CheckName::Leaks
        )
    });
    let runner = if dynamic && dataset.tasks.iter().any(|t| t.unsupported.is_empty()) {
        let client = DockerClient::connect().await.map_err(CliError::bad_input)?;
        Some(trials::Runner {
            backend: DockerBackend::new(client),
            jobs_dir: jobs_dir.join("jobs"),
            slots: Arc::new(Semaphore::new(args.n_concurrent as usize)),
            n_concurrent: args.n_concurrent,
            cancel: CancellationToken::new(),
        })
    } else {
        None
    };
    if let Some(runner) = &runner {
        let cancel = runner.cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        });
    }
    let mut handles = Vec::new();
    for (index, task) in dataset.tasks.iter().cloned().enumerate() {
        let context = judge::Context {
            runner: runner.clone(),
            selected: selected.clone(),
            repeat: args.repeat,
            stage_dir: jobs_dir.join("staged"),
            index,
        };
        handles.push(tokio::spawn(async move {
            let started = Instant::now();
            let mut report = judge::check_task(&context, &task).await;
            report.seconds = started.elapsed().as_secs_f64();
            note!("checked {} in {:.0}s", report.name, report.seconds);
            report
        }));
    }
    let mut reports: Vec<TaskReport> = dataset.skipped.iter().map(judge::malformed).collect();
    for handle in handles {
        reports.push(handle.await.map_err(CliError::runner)?);
    }
    reports.sort_by(|a, b| a.name.cmp(&b.name));
    if runner.as_ref().is_some_and(|r| r.cancel.is_cancelled()) {
        return Ok(CommandOutcome::Interrupted(
            crate::exit::Interruption::Interrupt,
        ));
    }
    match args.format {
        CheckFormat::Text => say!("{}", report::text(&reports).trim_end()),
        CheckFormat::Json => say!(
            "{}",
            serde_json::to_string_pretty(&report::json(&reports)).map_err(CliError::runner)?
        ),
        CheckFormat::Github => {
            let base = std::env::current_dir().unwrap_or_default();
            let annotations = report::github(&reports, &base);
            if !annotations.is_empty() {
                say!("{}", annotations.trim_end());
            }
            note!("{}", report::text(&reports).trim_end());
        }
    }
    if args.jobs_dir.is_some() {
        note!("the check's jobs are in {}", jobs_dir.display());
    }
    Ok(if reports.iter().any(TaskReport::failed) {
        CommandOutcome::Rejected
    } else {
        CommandOutcome::Success
    })
}
