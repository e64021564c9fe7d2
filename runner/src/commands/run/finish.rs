//! The end of `runner run`: the summary (readable, or JSON with `--format json`), also
//! written to job.log.

use std::path::Path;
use std::time::Duration;

use engine::job::{JobLog, JobOutcome};

use crate::commands::view::TextFormat;
use crate::exit::CliError;
use crate::report::{SummaryInput, colorize_summary, render_summary};
use crate::{note, say};

/// Prints the summary of a finished job: on stdout, or with `--format json` the JSON summary
/// (`runner.summary/v1`, as `runner summary --format json` prints it) on stdout and the
/// readable one on stderr (dropped with `--quiet`). A `pooled` run (several engines) adds a
/// line per engine, read from the trials' records.
pub fn report_outcome(
    outcome: &JobOutcome,
    job_dir: &Path,
    skipped: &[String],
    wall: Duration,
    format: TextFormat,
    pooled: bool,
) -> Result<(), CliError> {
    if outcome.swept > 0 {
        note!(
            "removed {} leftover container(s) of this job",
            outcome.swept
        );
    }
    let summary = render_summary(&SummaryInput {
        results: &outcome.results,
        planned: outcome.planned,
        skipped,
        wall: Some(wall),
        interrupted: outcome.interrupted,
        job_dir,
    });
    JobLog::open(job_dir).block("summary:", &summary);
    // The same figure as each trial.log's `overhead:` line's `runner` and bench/nop-trial.sh's.
    let overhead = outcome.median_overhead.map(|overhead| {
        format!(
            "runner overhead: median {:.2}s per trial (its wall time minus the time inside the agent's and verifier's commands, as in trial.log)",
            overhead.as_secs_f64()
        )
    });
    match format {
        TextFormat::Text => {
            say!("{}", colorize_summary(&summary, console::colors_enabled()));
            for line in outcome.llm.iter().flat_map(super::llm::summary_lines) {
                say!("{line}");
            }
            if let Some(line) = overhead {
                say!("{line}");
            }
            let engines = pooled.then(|| super::engine_summary::engine_lines(job_dir));
            for line in engines.into_iter().flatten() {
                say!("{line}");
            }
        }
        TextFormat::Json => {
            note!(
                "{}",
                colorize_summary(&summary, crate::output::stderr_colored())
            );
            if let Some(line) = overhead {
                note!("{line}");
            }
            let json = viewer::summary(job_dir)
                .map_err(CliError::runner)
                .and_then(|s| serde_json::to_string_pretty(&s).map_err(CliError::runner))?;
            say!("{json}");
        }
    }
    Ok(())
}
