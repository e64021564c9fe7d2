//! `runner validate-submission` and `runner validate-trajectory`.

use std::io::Write as _;
use std::path::PathBuf;

use leaderboard::submission::{self, Options, Report, render};

use crate::exit::{CliError, CommandOutcome, Family};
use crate::note;

/// Output format of the validators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable report.
    Text,
    /// A stable JSON document (schema `runner.validate-submission/v2`, see docs/leaderboard-preflight.md).
    Json,
    /// GitHub workflow `::error` annotations, plus a Markdown summary written to
    /// $GITHUB_STEP_SUMMARY (or stdout when it is not set).
    Github,
}

/// Arguments of `runner validate-submission`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Check job directories against leaderboard submission rules, offline",
    long_about = "Check one or more job directories (written by Harbor or by runner) as one leaderboard \
        submission, before spending or uploading, and say what the leaderboard will say.\n\n\
        Two verdicts. Leaderboard (decides the exit code): no timeout/resource overrides on the job or any \
        trial, complete trial results, every planned trial present once, one agent, agent config names \
        matching each trial's agent, at least --min-trials trials per task, task digests equal to the \
        dataset's (a dataset dir or a published dataset.toml manifest), a valid ATIF trajectory for every \
        rewarded trial, no rewarded trial that runner's records show compromised, no container secrets, \
        no provider-key-shaped strings, and metadata.yaml fields. Evidence (runner's own records; shown, \
        and deciding only with --require-evidence): verifier isolation, the verifier's toolchain, \
        declared models only, one image per task, the LLM bridge's metering. A Harbor-written job's \
        evidence is \"not recorded\".\n\n\
        Also reports the leaderboard's accuracy (over every planned trial, errored ones as 0), accuracy \
        with its standard error and clustered intervals, pass@k, trials per task and errored trials by \
        exception type.",
    after_help = format!("{}\nExample:\n  runner validate-submission jobs/2026-06-10__12-00-00 --dataset tasks/ \\\n      \
        --metadata submissions/my-agent/metadata.yaml", crate::exit::help_text(Family::Validate))
)]
pub struct ValidateSubmissionArgs {
    /// Job directories (each with a config.json), validated together as one submission.
    #[arg(value_name = "JOB_DIR", required = true)]
    pub job_dirs: Vec<PathBuf>,
    /// The dataset: a directory of tasks, a published manifest file (Harbor's dataset.toml
    /// with each task's name and digest), or a dataset by name, NAME@VERSION, from the registry
    /// (fetched and verified through the cache, as `run -d`). Every task must be covered, each
    /// trial at its digest.
    #[arg(long, value_name = "DIR|MANIFEST|NAME@VERSION")]
    pub dataset: Option<PathBuf>,
    /// The registry of a --dataset given by name.
    #[command(flatten)]
    pub registry: super::dataset_source::RegistryArgs,
    /// The submission's metadata.yaml (agent_url, agent_display_name, agent_org_display_name, models).
    #[arg(long, value_name = "FILE")]
    pub metadata: Option<PathBuf>,
    /// Minimum trials per task across all job dirs.
    #[arg(long, value_name = "N", default_value_t = submission::DEFAULT_MIN_TRIALS)]
    pub min_trials: usize,
    /// Every evidence rule decides the exit code too: a rule not recorded (a Harbor-written
    /// job) or failed makes the submission invalid. For operators who accept only runner-run jobs.
    #[arg(long)]
    pub require_evidence: bool,
    /// Accept only jobs whose record manifest is signed (`runner run --signing-key`) by this
    /// ed25519 public key (PEM from `openssl pkey -pubout`); repeat for several machines.
    #[arg(long, value_name = "FILE")]
    pub trusted_key: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Arguments of `runner validate-trajectory`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Check ATIF trajectory files (ATIF-v1.0 … v1.7)",
    long_about = "Check ATIF trajectory files against the schema of their schema_version (ATIF-v1.0 … \
        ATIF-v1.7): required and unknown fields, sequential step ids from 1, agent-only fields only on \
        agent steps, observation source_call_ids matching a tool call of the same step, timestamps, \
        llm_call_count, unique subagent trajectory ids, and image paths relative to the file. Every \
        error is printed with its JSON path.",
    after_help = crate::exit::help_text(Family::Validate)
)]
pub struct ValidateTrajectoryArgs {
    /// Trajectory files (e.g. <trial>/agent/trajectory.json).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Runs `runner validate-submission`.
pub fn validate_submission(args: ValidateSubmissionArgs) -> Result<CommandOutcome, CliError> {
    let dataset = match args.dataset {
        // A name, not a folder: `NAME@VERSION` that is no path here.
        Some(text) if !text.exists() && text.to_string_lossy().contains('@') => {
            let wanted = registry::DatasetName::parse(&text.to_string_lossy())
                .map_err(CliError::bad_input)?;
            Some(super::dataset_source::resolve(&args.registry.source(), &wanted)?.dir)
        }
        other => other,
    };
    let options = Options {
        dataset,
        metadata: args.metadata,
        min_trials: args.min_trials,
        require_evidence: args.require_evidence,
        trusted_keys: args.trusted_key,
        ..Options::new(args.job_dirs)
    };
    let report = match submission::validate(&options) {
        Ok(report) => report,
        Err(e) => {
            if args.format == Format::Github {
                crate::say!(
                    "::error title=validate-submission::{}",
                    render::escape_data(&e.to_string())
                );
            }
            return Err(CliError::bad_input_because("validate-submission", e));
        }
    };
    match print_report(&report, args.format) {
        // A reader that went away (`| head`) is not a failure of the validation.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(CliError::runner_because(
                "validate-submission: cannot write the report",
                e,
            ));
        }
        _ => {}
    }
    Ok(if report.valid {
        CommandOutcome::Success
    } else {
        CommandOutcome::Rejected
    })
}

/// Prints `report` in `format` on stdout (the GitHub summary to $GITHUB_STEP_SUMMARY when set).
pub fn print_report(report: &Report, format: Format) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match format {
        Format::Text => write!(stdout, "{}", render::text(report)),
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, report)?;
            writeln!(stdout)
        }
        Format::Github => {
            write!(stdout, "{}", render::annotations(report))?;
            write_summary(&render::markdown(report), &mut stdout)
        }
    }
}

/// Appends `markdown` to $GITHUB_STEP_SUMMARY when set (as the Actions runner expects), else
/// prints it.
fn write_summary(markdown: &str, stdout: &mut impl std::io::Write) -> std::io::Result<()> {
    match std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            write!(file, "{markdown}")
        }
        None => write!(stdout, "{markdown}"),
    }
}

/// Runs `runner validate-trajectory`.
pub fn validate_trajectory(args: ValidateTrajectoryArgs) -> Result<CommandOutcome, CliError> {
    let mut results = Vec::new();
    let mut unreadable = false;
    for file in &args.files {
        match tasks::atif::validate_file(file) {
            Ok(errors) => results.push((file, errors)),
            Err(e) => {
                unreadable = true;
                note!(
                    "runner validate-trajectory: {}: cannot read: {e}",
                    file.display()
                );
                if args.format == Format::Github {
                    crate::say!(
                        "::error file={}::{}",
                        render::escape_property(&file.display().to_string()),
                        render::escape_data(&format!("cannot read: {e}"))
                    );
                }
            }
        }
    }
    let mut out = String::new();
    match args.format {
        Format::Text => {
            for (file, errors) in &results {
                if errors.is_empty() {
                    out.push_str(&format!("{}: valid\n", file.display()));
                } else {
                    out.push_str(&format!("{}: {} error(s)\n", file.display(), errors.len()));
                    for e in errors {
                        out.push_str(&format!("  {}: {}\n", e.path, e.message));
                    }
                }
            }
        }
        Format::Json => {
            let files: Vec<serde_json::Value> = results
                .iter()
                .map(|(file, errors)| {
                    serde_json::json!({"file": file.display().to_string(), "valid": errors.is_empty(), "errors": errors})
                })
                .collect();
            let doc =
                serde_json::json!({"schema": "runner.validate-trajectory/v1", "files": files});
            out = serde_json::to_string_pretty(&doc).expect("JSON values serialize") + "\n";
        }
        Format::Github => {
            for (file, errors) in &results {
                for e in errors {
                    out.push_str(&format!(
                        "::error file={},title={}::{}\n",
                        render::escape_property(&file.display().to_string()),
                        render::escape_property(&e.path),
                        render::escape_data(&e.message)
                    ));
                }
            }
        }
    }
    {
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(out.as_bytes());
    }
    if unreadable {
        Err(CliError::bad_input(
            "validate-trajectory: some files cannot be read (listed above)",
        ))
    } else if results.iter().any(|(_, errors)| !errors.is_empty()) {
        Ok(CommandOutcome::Rejected)
    } else {
        Ok(CommandOutcome::Success)
    }
}
