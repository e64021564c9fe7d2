//! `runner submission prepare`: validate the jobs as the leaderboard will, then write
//! `OUT/submissions/<benchmark>/<version>/<agent>__<model>/` with a scrubbed copy of each job
//! dir (`runner scrub`'s code, verified from disk), a pre-filled `metadata.yaml` and the
//! validation report of the copies. Everything is staged beside the folder and renamed into
//! place at the end, so a refusal or a failure leaves nothing behind.

use std::fmt;
use std::path::{Path, PathBuf};

use leaderboard::scrub::{self, ScrubOptions, ScrubOutcome, SecretSet, SecretSetBuilder};
use leaderboard::submission::{self, Options, Report, render};

use super::metadata;
use crate::exit::{CliError, CommandOutcome, Family};
use crate::{note, say};

/// The validation report's file name in the submission folder.
pub const REPORT_FILE: &str = "validate-submission.json";

/// Arguments of `runner submission prepare`.
#[derive(clap::Args)]
#[command(
    disable_version_flag = true,
    about = "Write a leaderboard submission folder from finished job dirs",
    long_about = "Validate the job dirs as one submission (as `validate-submission` does) and, when the \
        leaderboard verdict is valid, write OUT/submissions/<benchmark>/<version>/<agent>__<model>/ with a \
        scrubbed copy of each job dir (every credential of the environment and of --secrets-from/--secret \
        removed, as `runner scrub` does, and the copy verified), a metadata.yaml pre-filled from the trials \
        (agent name and version, model and provider) whose FILL-IN fields a person must write, and \
        validate-submission.json. An invalid submission is refused and nothing is written, unless --force.",
    after_help = format!("{}\nExample:\n  runner submission prepare jobs/2026-06-10__12-00-00 --benchmark terminal-bench \\\n      \
        --version 2.0 -o ../leaderboard-fork --secrets-from .env", crate::exit::help_text(Family::Validate))
)]
pub struct PrepareArgs {
    /// Job directories (each with a config.json) forming one submission.
    #[arg(value_name = "JOB_DIR", required = true)]
    pub job_dirs: Vec<PathBuf>,
    /// The benchmark's folder under submissions/.
    #[arg(long, default_value = "terminal-bench")]
    pub benchmark: String,
    /// The benchmark version's folder.
    #[arg(long = "version", value_name = "VERSION", default_value = "2.0")]
    pub benchmark_version: String,
    /// Where to write: the leaderboard repository's checkout (submissions/… is created in it).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// The dataset: a directory of tasks or a published manifest (dataset.toml).
    #[arg(long, value_name = "DIR|MANIFEST")]
    pub dataset: Option<PathBuf>,
    /// Minimum trials per task across all job dirs.
    #[arg(long, value_name = "N", default_value_t = submission::DEFAULT_MIN_TRIALS)]
    pub min_trials: usize,
    /// Refuse unless runner's evidence is recorded and holds too (as `validate-submission`).
    #[arg(long)]
    pub require_evidence: bool,
    /// Write the folder even when the submission is invalid (the exit code still says so).
    #[arg(long)]
    pub force: bool,
    /// More secrets to remove, from a .env or JSON settings file (as `runner scrub`). Repeatable.
    #[arg(long = "secrets-from", value_name = "FILE")]
    pub secrets_from: Vec<PathBuf>,
    /// A secret to remove, `NAME=VALUE` or a bare NAME read from the environment. Repeatable.
    #[arg(long = "secret", value_name = "NAME=VALUE")]
    pub secret: Vec<String>,
}

// Hand-written so a debug print of the CLI can never show a secret value.
impl fmt::Debug for PrepareArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrepareArgs")
            .field("job_dirs", &self.job_dirs)
            .field("benchmark", &self.benchmark)
            .field("benchmark_version", &self.benchmark_version)
            .field("out", &self.out)
            .field("dataset", &self.dataset)
            .field("force", &self.force)
            .field("secrets_from", &self.secrets_from)
            .field("secret", &format_args!("<{} hidden>", self.secret.len()))
            .finish()
    }
}

/// Runs `runner submission prepare`.
pub fn prepare(args: PrepareArgs) -> Result<CommandOutcome, CliError> {
    for (flag, value) in [
        ("--benchmark", &args.benchmark),
        ("--version", &args.benchmark_version),
    ] {
        if !is_plain_component(value) {
            return Err(CliError::bad_input(format!(
                "{flag} {value:?}: must be one folder name (letters, digits, '.', '_', '-'), e.g. terminal-bench or 2.0"
            )));
        }
    }
    let names = job_names(&args.job_dirs)?;
    // Bad input (a path that is not a job dir, a dataset that does not load) shows before
    // anything is copied; the verdict is the copies', which is what the leaderboard receives
    // (a key an agent printed into its log fails the originals, not the scrubbed copies),
    // except the records rules: those judge the originals, as runner hashed them.
    let original = validate(&args, args.job_dirs.clone(), Vec::new(), Vec::new())?;
    let agent = original
        .agent
        .clone()
        .unwrap_or_else(|| submission::SubmittedAgent {
            name: "unknown-agent".into(),
            version: None,
            model: None,
        });
    let parent = args
        .out
        .join("submissions")
        .join(&args.benchmark)
        .join(&args.benchmark_version);
    let dest = parent.join(metadata::folder_name(&agent));
    if dest.exists() {
        return Err(CliError::bad_input(format!(
            "{}: already exists; remove it or pass another -o (a submission folder is written whole, never merged into)",
            dest.display()
        )));
    }
    let secrets = secret_set(&args)?;
    std::fs::create_dir_all(&parent).map_err(|e| {
        CliError::bad_input_because(format!("-o: cannot create {}", parent.display()), e)
    })?;
    // Removed on drop: every refusal below leaves nothing behind.
    let stage = tempfile::Builder::new()
        .prefix(".submission-prepare-")
        .tempdir_in(&parent)
        .map_err(|e| {
            CliError::runner_because(format!("cannot stage in {}", parent.display()), e)
        })?;
    let mut copies = Vec::new();
    for (dir, name) in args.job_dirs.iter().zip(&names) {
        let output = stage.path().join(name);
        if !scrub_job(dir, &output, &secrets)? {
            return Ok(CommandOutcome::Rejected);
        }
        copies.push(output);
    }
    let report = validate(&args, copies, names.clone(), args.job_dirs.clone())?;
    say!("{}", render::text(&report).trim_end());
    if !report.valid && !args.force {
        note!(
            "runner submission prepare: refused: the submission is INVALID (above, as the leaderboard would receive \
             the scrubbed copies); nothing was written. Fix the jobs, or pass --force to write the folder anyway"
        );
        return Ok(CommandOutcome::Rejected);
    }
    write_files(stage.path(), &agent, &report)?;
    let staged = stage.keep();
    tasks::atomic::rename_durable(&staged, &dest).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        CliError::runner_because(format!("cannot move the folder to {}", dest.display()), e)
    })?;
    print_written(&dest, &names, &report, args.force);
    Ok(if report.valid {
        CommandOutcome::Success
    } else {
        CommandOutcome::Rejected
    })
}

/// One folder name: no separator, not `.`/`..`, nothing a shell or a URL would mangle.
fn is_plain_component(value: &str) -> bool {
    !value.is_empty()
        && value != "."
        && value != ".."
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Each job dir's folder name in the submission: its own name, which must be unique.
fn job_names(dirs: &[PathBuf]) -> Result<Vec<String>, CliError> {
    let mut names: Vec<String> = Vec::new();
    for dir in dirs {
        let name = std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .ok_or_else(|| {
                CliError::bad_input(format!(
                    "{}: not a job directory (it does not exist, or has no name)",
                    dir.display()
                ))
            })?;
        if names.contains(&name) {
            return Err(CliError::bad_input(format!(
                "two job dirs are named {name}: a submission folder holds each job dir under its own name; rename one"
            )));
        }
        names.push(name);
    }
    Ok(names)
}

/// Validates `job_dirs` shown as `job_names`; the records rules judge `records_of` (the
/// originals of scrubbed copies: scrub rewrites what it redacts, which no manifest vouches for).
fn validate(
    args: &PrepareArgs,
    job_dirs: Vec<PathBuf>,
    job_names: Vec<String>,
    records_of: Vec<PathBuf>,
) -> Result<Report, CliError> {
    let options = Options {
        dataset: args.dataset.clone(),
        min_trials: args.min_trials,
        require_evidence: args.require_evidence,
        job_names,
        records_of,
        ..Options::new(job_dirs)
    };
    submission::validate(&options).map_err(|e| CliError::bad_input_because("submission prepare", e))
}

/// The secrets to remove: every credential of this environment (the provider keys a run
/// passes to agents live there) and those given.
fn secret_set(args: &PrepareArgs) -> Result<SecretSet, CliError> {
    let bad = |e: scrub::ScrubError| CliError::bad_input_because("submission prepare", e);
    let mut builder = SecretSetBuilder::new(false);
    for (i, (name, value)) in secrets::host_credentials().into_iter().enumerate() {
        builder
            .add_pair("the environment", i + 1, &format!("{name}={value}"))
            .map_err(bad)?;
    }
    for path in &args.secrets_from {
        builder.add_file(path).map_err(bad)?;
    }
    for (i, pair) in args.secret.iter().enumerate() {
        builder.add_pair("--secret", i + 1, pair).map_err(bad)?;
    }
    builder.build().map_err(|e| match e {
        scrub::ScrubError::NoSecrets => CliError::bad_input(
            "submission prepare: no secret to scrub: no credential variable is set in this environment; \
             pass the ones the run used with --secrets-from .env or --secret NAME",
        ),
        e => bad(e),
    })
}

/// Scrubs `dir` into `output`; false (after saying why) when the scrub aborted.
fn scrub_job(dir: &Path, output: &Path, secrets: &SecretSet) -> Result<bool, CliError> {
    let options = ScrubOptions {
        input: dir.to_owned(),
        output: output.to_owned(),
        secrets: secrets.clone(),
        drop_unscannable: false,
        disabled_forms: Vec::new(),
    };
    match scrub::scrub(&options) {
        Ok(ScrubOutcome::Written(_)) => Ok(true),
        Ok(ScrubOutcome::Aborted(report)) => {
            note!(
                "runner submission prepare: refused: the scrub of {} aborted ({} file(s) it cannot search, {} leftover(s) \
                 after scrubbing); nothing was written. `runner scrub --in {} --out DEST` lists them",
                dir.display(),
                report.unscannable.len(),
                report.leftovers.len(),
                dir.display()
            );
            Ok(false)
        }
        Err(e) if e.is_bad_input() => Err(CliError::bad_input_because("submission prepare", e)),
        Err(e) => Err(CliError::runner_because("submission prepare: scrub", e)),
    }
}

fn write_files(
    stage: &Path,
    agent: &submission::SubmittedAgent,
    report: &Report,
) -> Result<(), CliError> {
    let failed =
        |e: std::io::Error| CliError::runner_because("submission prepare: cannot write", e);
    tasks::atomic::write_atomic(
        &stage.join("metadata.yaml"),
        metadata::render(agent).as_bytes(),
    )
    .map_err(failed)?;
    tasks::atomic::write_json_atomic(&stage.join(REPORT_FILE), report).map_err(failed)
}

fn print_written(dest: &Path, names: &[String], report: &Report, forced: bool) {
    let dest = dest.display();
    say!(
        "runner submission prepare: wrote {dest} ({} scrubbed job dir(s): {}; metadata.yaml; {REPORT_FILE})",
        names.len(),
        names.join(", ")
    );
    if forced && !report.valid {
        say!(
            "written although the submission is INVALID (--force): the leaderboard will reject it as it is ({})",
            report.deciding_failures().join(", ")
        );
    }
    say!(
        "next: replace every {} value in {dest}/metadata.yaml, then check the folder as the leaderboard's CI will:\n  \
         runner validate-submission --metadata {dest}/metadata.yaml {}",
        submission::metadata::PLACEHOLDER,
        names
            .iter()
            .map(|n| format!("{dest}/{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}
