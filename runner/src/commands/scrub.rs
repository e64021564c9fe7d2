//! `runner scrub`: write a publishable copy of a job directory with every known secret removed.

use std::fmt;
use std::path::PathBuf;

use leaderboard::scrub::{self, Report, ScrubError, ScrubOptions, SecretSetBuilder};

use crate::exit::{CliError, CommandOutcome, Family};
use crate::{note, say};

/// Arguments of `runner scrub`.
#[derive(clap::Args)]
#[command(
    about = "Write a publishable copy of a job directory with every known secret removed",
    after_help = format!("Values are searched raw, JSON-escaped, URL-encoded, base64 (every alignment), hex, masked \
        (abcd****xyz), split by line wraps or ANSI codes, inside gzip/tar/tar.gz and in file names. The copy is \
        verified again from disk before DEST appears; DEST/scrub-report.json counts redactions per file, secret \
        name and form, never values.\n\n{}\n\
        Example:\n  runner scrub --in jobs/2026-01-01 --out public/2026-01-01 \\\n      \
        --secrets-from .env --env-passthrough ANTHROPIC_API_KEY", crate::exit::help_text(Family::Scrub))
)]
pub struct ScrubArgs {
    /// Job directory to copy from. It is only read, never modified.
    #[arg(long = "in", value_name = "JOB_DIR")]
    pub input: PathBuf,
    /// Where to write the clean copy. Must not exist yet; created only when the copy is clean.
    #[arg(long = "out", value_name = "DEST")]
    pub output: PathBuf,
    /// Read secrets from a .env file (every NAME=VALUE) or a JSON settings file (strings under
    /// credential-like keys such as apiKey/token/password, and every value of an `env` block).
    /// Repeatable.
    #[arg(long = "secrets-from", value_name = "FILE")]
    pub secrets_from: Vec<PathBuf>,
    /// A secret value to remove. A bare NAME reads the value from the environment, which keeps it
    /// out of shell history. Repeatable.
    #[arg(long = "secret", value_name = "NAME=VALUE")]
    pub secret: Vec<String>,
    /// An environment value the run passed through to the agent (harnesses copy these into their
    /// config files). A bare NAME reads it from the environment. Repeatable.
    #[arg(long = "env-passthrough", value_name = "NAME=VALUE")]
    pub env_passthrough: Vec<String>,
    /// Accept values shorter than the minimum secret length (they will be redacted wherever
    /// they occur).
    #[arg(long, help = allow_short_help())]
    pub allow_short: bool,
    /// Leave out files that cannot be searched (zip, 7z, rar, xz, encrypted, corrupt) and list them
    /// in the report, instead of aborting.
    #[arg(long)]
    pub drop_unscannable: bool,
}

// Hand-written so a debug print of the CLI can never show a secret value.
impl fmt::Debug for ScrubArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScrubArgs")
            .field("input", &self.input)
            .field("output", &self.output)
            .field("secrets_from", &self.secrets_from)
            .field("secret", &format_args!("<{} hidden>", self.secret.len()))
            .field(
                "env_passthrough",
                &format_args!("<{} hidden>", self.env_passthrough.len()),
            )
            .field("allow_short", &self.allow_short)
            .field("drop_unscannable", &self.drop_unscannable)
            .finish()
    }
}

/// `--allow-short`'s help, naming the minimum the scrubber applies (one constant, in the
/// `secrets` crate).
fn allow_short_help() -> String {
    format!(
        "Accept values shorter than {} characters (they will be redacted wherever they occur)",
        scrub::MIN_SECRET_LEN
    )
}

/// Runs `runner scrub`.
pub fn run(args: ScrubArgs) -> Result<CommandOutcome, CliError> {
    match try_run(args) {
        Ok(outcome) => Ok(outcome),
        Err(e) if e.is_bad_input() => Err(CliError::bad_input_because("scrub", e)),
        Err(e) => {
            // Anything else stops the scrub before the copy appears: an abort, not a crash.
            note!("runner scrub: {e}");
            Ok(CommandOutcome::Rejected)
        }
    }
}

fn try_run(args: ScrubArgs) -> Result<CommandOutcome, ScrubError> {
    let mut builder = SecretSetBuilder::new(args.allow_short);
    for path in &args.secrets_from {
        builder.add_file(path)?;
    }
    for (i, pair) in args.secret.iter().enumerate() {
        builder.add_pair("--secret", i + 1, pair)?;
    }
    for (i, pair) in args.env_passthrough.iter().enumerate() {
        builder.add_pair("--env-passthrough", i + 1, pair)?;
    }
    let options = ScrubOptions {
        input: args.input,
        output: args.output,
        secrets: builder.build()?,
        drop_unscannable: args.drop_unscannable,
        disabled_forms: Vec::new(),
    };
    Ok(match scrub::scrub(&options)? {
        scrub::ScrubOutcome::Written(report) => {
            print_written(&options, &report);
            CommandOutcome::Success
        }
        scrub::ScrubOutcome::Aborted(report) => {
            print_aborted(&options, &report);
            CommandOutcome::Rejected
        }
    })
}

fn print_written(options: &ScrubOptions, report: &Report) {
    say!(
        "runner scrub: wrote {} ({} files, {} bytes, {} redactions of {} secrets); report: {}",
        options.output.display(),
        report.totals.files,
        report.totals.bytes,
        report.totals.redactions,
        report.secrets.len(),
        options.output.join(scrub::REPORT_FILE).display(),
    );
    for dropped in &report.unscannable {
        say!("  dropped {} ({})", dropped.path, dropped.reason);
    }
}

fn print_aborted(options: &ScrubOptions, report: &Report) {
    note!(
        "runner scrub: aborted; {} was not created and the input is unchanged",
        options.output.display()
    );
    if !report.unscannable.is_empty() {
        note!("files that cannot be scrubbed (pass --drop-unscannable to leave them out):");
        for dropped in &report.unscannable {
            note!("  {} ({})", dropped.path, dropped.reason);
        }
    }
    if !report.leftovers.is_empty() {
        note!("found in the copy after scrubbing (values not shown):");
        for left in &report.leftovers {
            let what = match &left.secret {
                Some(name) => format!("secret {name} as {}", left.form),
                None if left.form == scrub::PROVIDER_KEY_FORM => {
                    "an undeclared provider-key-shaped string; pass it with --secret NAME=VALUE"
                        .to_string()
                }
                None => "content the verifier cannot read".to_string(),
            };
            note!("  {} [{:?}]: {what}", left.path, left.location);
        }
    }
}
