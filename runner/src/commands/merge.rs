//! `runner merge`: one job dir from the shards of a `--shard I/N` split, or from any jobs of
//! one plan (a re-run of failed trials), as if the job had run in one go.

use std::path::PathBuf;

use engine::job::merge::{MergeReport, merge as merge_jobs};

use crate::exit::{CliError, CommandOutcome, Family};
use crate::{note, say};

/// Arguments of `runner merge`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::exit::help_text(Family::Merge))]
pub struct MergeArgs {
    /// The new job directory (must not exist, or be empty).
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out: PathBuf,
    /// The job directories to merge: the shards of one `--shard I/N` split, or jobs of one
    /// plan (same agent and config, model, dataset, k, multipliers and limits). A trial in
    /// several is taken once: a result over an infrastructure error over none; two results
    /// that differ are refused.
    #[arg(value_name = "JOB_DIR", required = true)]
    pub jobs: Vec<PathBuf>,
    /// Sign the merged job's record manifest with this ed25519 private key (PEM, PKCS#8), as
    /// `runner run --signing-key` does (the parts' own signatures are checked, not carried).
    #[arg(long, value_name = "FILE", env = "RUNNER_SIGNING_KEY")]
    pub signing_key: Option<PathBuf>,
}

/// The key of `--signing-key` (`runner run`'s and `runner merge`'s), read before any work: a
/// key that cannot sign must not cost a whole job.
pub(crate) fn read_signing_key(
    flag: Option<&std::path::Path>,
) -> Result<Option<tasks::records::record_signature::SigningKey>, CliError> {
    flag.map(tasks::records::record_signature::read_signing_key)
        .transpose()
        .map_err(|e| CliError::bad_input_because("--signing-key", e))
}

/// Runs `runner merge`.
pub fn merge(args: MergeArgs) -> Result<CommandOutcome, CliError> {
    let signing_key = read_signing_key(args.signing_key.as_deref())?;
    let report = merge_jobs(&args.jobs, &args.out).map_err(|e| {
        if e.is_bad_input() {
            CliError::bad_input(e)
        } else {
            CliError::runner(e)
        }
    })?;
    if let Some(key) = &signing_key {
        engine::job::record_manifest::sign_job(&report.out, key).map_err(|e| {
            CliError::runner(format!(
                "{}: cannot sign the record manifest: {e}",
                report.out.display()
            ))
        })?;
    }
    print(&report);
    Ok(if report.incomplete() {
        CommandOutcome::TrialsErrored
    } else {
        CommandOutcome::Success
    })
}

fn print(report: &MergeReport) {
    for line in report.choices.iter().chain(&report.recounted_sources) {
        note!("{line}");
    }
    for stray in &report.strays {
        note!("left out {stray}: no part's plan names it");
    }
    for part in &report.unrecorded {
        note!(
            "{}: no record_manifest.jsonl (a job of an earlier runner): its trials are merged but not recorded",
            part.display()
        );
    }
    let c = &report.coverage;
    say!(
        "{}: {} trial(s) planned from {} job dir(s): {} scored, {} agent error(s), {} infrastructure error(s), {} without a result ({} file(s) copied)",
        report.out.display(),
        report.planned,
        report
            .taken
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        c.scored,
        c.agent_error,
        c.infra_error,
        c.not_run,
        report.files
    );
    if !report.missing_shards.is_empty() {
        say!(
            "missing shard(s): {} of {}; run them (`runner run … --shard I/{}`) and merge again",
            report
                .missing_shards
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            report.n_shards.unwrap_or(0),
            report.n_shards.unwrap_or(0)
        );
    }
    if !report.missing_trials.is_empty() {
        const SHOWN: usize = 20;
        let more = report.missing_trials.len().saturating_sub(SHOWN);
        say!(
            "{} trial(s) without a result: {}{}",
            report.missing_trials.len(),
            report.missing_trials[..report.missing_trials.len().min(SHOWN)].join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
}
