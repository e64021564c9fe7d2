//! `records_unchanged` and `trusted_signature`: every trial's files are what runner hashed into
//! the job's `record_manifest.jsonl` as the trial ended (and config.json and lock.json what it
//! last wrote), the manifest is what its `record_manifest.sig` signed, and with
//! `--trusted-key` the signer is a trusted key. Harbor writes no manifest: its jobs are "not
//! recorded" (the rule is skipped when no job has one). A job runner wrote (lock.json names a
//! `runner`) without a manifest fails: deleting the manifest must not hide an edit.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tasks::records::record_manifest::{describe_changes, file_digest};
use tasks::records::record_signature::{ManifestSignature, RECORD_SIGNATURE, VerifyingKey, verify};
use tasks::records::{RECORD_MANIFEST, RecordManifest, str_at};

use super::Rule;
use super::job::Job;
use super::report::Violation;

/// Why `records_unchanged` is skipped when no job keeps a manifest.
pub const NOT_RECORDED: &str =
    "not recorded: no job has a record_manifest.jsonl (Harbor-written jobs keep none)";

/// Why `trusted_signature` is skipped without `--trusted-key`.
pub const NEEDS_TRUSTED_KEY: &str = "needs --trusted-key FILE";

/// What the records of the jobs say.
pub struct RecordsCheck {
    /// Violations of `records_unchanged` and `trusted_signature`.
    pub violations: Vec<Violation>,
    /// Whether any job keeps a manifest or was written by runner (else the rule is skipped).
    pub any_recorded: bool,
}

/// Checks every job (`dirs[i]` is `jobs[i]`'s dir, or the original it was copied from: its
/// trials are then judged there, by name) against its manifest, and its signature against
/// `trusted` (empty: only that the signature, if any, holds).
pub fn check(dirs: &[PathBuf], jobs: &[Job], trusted: &[VerifyingKey]) -> RecordsCheck {
    let mut out = RecordsCheck {
        violations: Vec::new(),
        any_recorded: false,
    };
    for (dir, job) in dirs.iter().zip(jobs) {
        check_job(dir, job, trusted, &mut out);
    }
    out
}

fn check_job(dir: &Path, job: &Job, trusted: &[VerifyingKey], out: &mut RecordsCheck) {
    let shown = |name: &str| Some(format!("{}/{name}", job.display));
    let violation = |rule, file, message: String| Violation::new(rule, file, message);
    let bytes = match std::fs::read(dir.join(RECORD_MANIFEST)) {
        Ok(bytes) => bytes,
        Err(_) => {
            if written_by_runner(dir) {
                out.any_recorded = true;
                out.violations.push(violation(
                    Rule::RecordsUnchanged,
                    shown(RECORD_MANIFEST),
                    "missing, though runner wrote this job (lock.json names it): runner hashes every trial's records into it as the trial ends, so without it nothing shows the records are the run's; submit the job as runner left it".into(),
                ));
            }
            if !trusted.is_empty() {
                out.violations.push(violation(
                    Rule::TrustedSignature,
                    shown(RECORD_MANIFEST),
                    "not recorded, so not signed: only jobs runner signed with a trusted key (--signing-key) are accepted".into(),
                ));
            }
            return;
        }
    };
    out.any_recorded = true;
    let manifest = match RecordManifest::parse(&bytes) {
        Ok(m) => m,
        Err(e) => {
            out.violations.push(violation(
                Rule::RecordsUnchanged,
                shown(RECORD_MANIFEST),
                format!("malformed ({e}): the manifest runner writes always parses"),
            ));
            return;
        }
    };
    check_signature(dir, &bytes, trusted, &shown, out);
    for (name, recorded) in &manifest.job_files {
        let now = file_digest(&dir.join(name)).ok();
        if now.as_ref() != Some(recorded) {
            out.violations.push(violation(
                Rule::RecordsUnchanged,
                shown(name),
                format!(
                    "{} after runner last wrote it (record_manifest.jsonl holds its sha256)",
                    if now.is_some() { "changed" } else { "removed" }
                ),
            ));
        }
    }
    for trial in &job.trial_dirs {
        let trial = match trial.file_name() {
            Some(name) if trial.parent() != Some(dir) => dir.join(name),
            _ => trial.clone(),
        };
        check_trial(&trial, &manifest, &job.display, out);
    }
}

fn check_trial(trial: &Path, manifest: &RecordManifest, display: &str, out: &mut RecordsCheck) {
    let name = trial
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = Some(format!("{display}/{name}"));
    let Some(entry) = manifest.trials.get(&name) else {
        // A trial that never ended has no entry; trial_results_complete names it.
        if !trial.join("result.json").exists() {
            return;
        }
        out.violations.push(Violation::new(
            Rule::RecordsUnchanged,
            file,
            format!("trial {name} is not in record_manifest.jsonl: runner records every trial as it ends, so this one was added or replaced after the run (or its job ended between its result and its manifest line; resume it)"),
        ));
        return;
    };
    let changes = match entry.changes(trial) {
        Ok(changes) => changes,
        Err(e) => {
            out.violations.push(Violation::new(
                Rule::RecordsUnchanged,
                file,
                format!("trial {name}: cannot be read to compare with record_manifest.jsonl: {e}"),
            ));
            return;
        }
    };
    if !changes.is_empty() {
        out.violations.push(Violation::new(
            Rule::RecordsUnchanged,
            file,
            format!(
                "trial {name}: records differ from what runner hashed as the trial ended: {}",
                describe_changes(&changes)
            ),
        ));
    }
}

fn check_signature(
    dir: &Path,
    manifest: &[u8],
    trusted: &[VerifyingKey],
    shown: &dyn Fn(&str) -> Option<String>,
    out: &mut RecordsCheck,
) {
    let signature = std::fs::read(dir.join(RECORD_SIGNATURE)).ok().map(|b| {
        serde_json::from_slice::<ManifestSignature>(&b)
            .map_err(|e| format!("record_manifest.sig is malformed: {e}"))
    });
    let problem = match signature {
        None if trusted.is_empty() => return,
        None => Some((
            Rule::TrustedSignature,
            "not signed: only jobs runner signed with a trusted key (runner run --signing-key) are accepted".to_owned(),
        )),
        Some(Err(e)) => Some((Rule::RecordsUnchanged, e)),
        Some(Ok(sig)) => match verify(&sig, manifest, trusted) {
            Ok(_) => None,
            Err(e @ tasks::records::record_signature::SignatureProblem::Untrusted(_)) => {
                Some((Rule::TrustedSignature, e.to_string()))
            }
            Err(e) => Some((Rule::RecordsUnchanged, e.to_string())),
        },
    };
    if let Some((rule, message)) = problem {
        out.violations
            .push(Violation::new(rule, shown(RECORD_SIGNATURE), message));
    }
}

/// Whether runner wrote the job: its lock.json records a `runner` (Harbor's has `harbor` only).
fn written_by_runner(dir: &Path) -> bool {
    tasks::records::read::read_json(&dir.join("lock.json"))
        .ok()
        .flatten()
        .is_some_and(|lock: Value| str_at(&lock, "/runner/version").is_some())
}
