//! `scrub`: writes a publishable copy of a job directory with every known secret value removed in
//! every form it can take, verifies the copy independently, and refuses to produce a maybe-clean
//! tree. Flow: load secrets → expand forms → copy into a staging dir next to DEST → verify the
//! staged copy from disk → rename to DEST, or delete it and report what was left.

mod classify;
mod content;
mod error;
mod findings;
mod flatten;
mod forms;
mod load;
mod matcher;
mod report;
mod secrets;
mod tree;
mod verify;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

/// Values shorter than this many characters are refused unless `--allow-short` is given.
pub use ::secrets::MIN_SECRET_LEN;
pub use error::ScrubError;
pub use findings::Location;
pub use forms::Form;
pub use report::{REPORT_FILE, Report, Row};
pub use secrets::{Secret, SecretSet, SecretSetBuilder};
pub use tree::Dropped;
pub use verify::{Leftover, PROVIDER_KEY_FORM, UNVERIFIABLE_FORM};

use matcher::Matcher;
use verify::Verifier;

/// What to scrub and how.
#[derive(Debug, Clone)]
pub struct ScrubOptions {
    /// The job directory (read only).
    pub input: PathBuf,
    /// Where the clean copy goes; must not exist.
    pub output: PathBuf,
    /// The known secrets.
    pub secrets: SecretSet,
    /// Leave out files that cannot be scrubbed (listed in the report) instead of aborting.
    pub drop_unscannable: bool,
    /// Forms the scrubber skips; a test hook proving the verifier catches what the scrubber misses.
    pub disabled_forms: Vec<Form>,
}

/// How a scrub ended.
#[derive(Debug)]
pub enum ScrubOutcome {
    /// DEST was written; the report is also in `DEST/scrub-report.json`.
    Written(Report),
    /// Nothing was written: unscannable files or leftovers, named in the report.
    Aborted(Report),
}

/// Runs a scrub. Errors are bad input or I/O failures; an aborted scrub is an [`ScrubOutcome`].
pub fn scrub(options: &ScrubOptions) -> Result<ScrubOutcome, ScrubError> {
    let parent = check_paths(&options.input, &options.output)?;
    let matcher = Matcher::new(&options.secrets, &options.disabled_forms)?;
    let dest_name = options
        .output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Same filesystem as DEST so the final rename is atomic; removed on drop unless kept.
    let stage = tempfile::Builder::new()
        .prefix(&format!(".{dest_name}.scrub-"))
        .tempdir_in(&parent)
        .map_err(ScrubError::io(&parent))?;
    let copied = tree::copy_tree(&matcher, &options.input, stage.path())?;
    let mut report = Report::new(&options.secrets, &matcher, &copied.findings);
    report.totals.files = copied.files;
    report.totals.bytes = copied.bytes;
    report.unscannable = copied.unscannable;
    if !report.unscannable.is_empty() && !options.drop_unscannable {
        report.outcome = "aborted";
        return Ok(ScrubOutcome::Aborted(report));
    }

    let report_path = stage.path().join(REPORT_FILE);
    // An input that already has a report at the top (a scrubbed copy) gets a fresh one.
    if report_path.symlink_metadata().is_ok() {
        std::fs::remove_file(&report_path).map_err(ScrubError::io(&report_path))?;
    }
    // The verifier expands every form itself, so a form the scrubber skipped is still searched.
    let verifier = Verifier::new(
        &forms::expand(&options.secrets.secrets, &[]),
        matcher.names(),
    );
    let (mut leftovers, bytes_read) = verifier.verify_tree(stage.path())?;
    report.verification.bytes_read = bytes_read;
    report.verification.provider_key_scan = true;
    report.verification.needles = verifier.needle_count();
    leftovers.extend(verifier.verify_bytes(&report.to_json(), REPORT_FILE));
    if !leftovers.is_empty() {
        // A leftover in a name would otherwise be printed in the abort report.
        for left in &mut leftovers {
            left.path = matcher.printable_path(&left.path);
        }
        report.outcome = "aborted";
        report.leftovers = leftovers;
        return Ok(ScrubOutcome::Aborted(report));
    }

    std::fs::write(&report_path, report.to_json()).map_err(ScrubError::io(&report_path))?;
    let mode = std::fs::metadata(&options.input)
        .map_err(ScrubError::io(&options.input))?
        .permissions();
    std::fs::set_permissions(stage.path(), mode).map_err(ScrubError::io(stage.path()))?;
    let staged = stage.keep();
    if let Err(source) = std::fs::rename(&staged, &options.output) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(ScrubError::Io {
            path: options.output.clone(),
            source,
        });
    }
    Ok(ScrubOutcome::Written(report))
}

/// Validates `--in` and `--out`; returns DEST's parent directory.
fn check_paths(input: &Path, output: &Path) -> Result<PathBuf, ScrubError> {
    if !input.is_dir() {
        return Err(ScrubError::InputNotDir(input.to_path_buf()));
    }
    if output.symlink_metadata().is_ok() {
        return Err(ScrubError::OutputExists(output.to_path_buf()));
    }
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if output.file_name().is_none() || !parent.is_dir() {
        return Err(ScrubError::OutputParentMissing(output.to_path_buf()));
    }
    let canonical_input = input.canonicalize().map_err(ScrubError::io(input))?;
    let canonical_parent = parent.canonicalize().map_err(ScrubError::io(&parent))?;
    if canonical_parent.starts_with(&canonical_input) {
        return Err(ScrubError::OutputInsideInput {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
        });
    }
    Ok(parent)
}
