//! `scrub-report.json`: counts per file × secret name × form, and what was dropped or left over.
//! Holds names, forms and paths only: no values and no hashes of values.

use serde::Serialize;

use super::findings::{Findings, Location};
use super::matcher::Matcher;
use super::secrets::SecretSet;
use super::tree::Dropped;
use super::verify::Leftover;

/// File name of the report at the top of the copy.
pub const REPORT_FILE: &str = "scrub-report.json";

/// The report of one scrub.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Report format version.
    pub schema_version: u32,
    /// `clean` (the copy was written) or `aborted`.
    pub outcome: &'static str,
    /// The tool and its version.
    pub tool: String,
    /// The secrets searched for, by name.
    pub secrets: Vec<SecretSummary>,
    /// Names of file entries skipped because their values are plainly not secret (`true`, `0`).
    pub skipped_benign: Vec<String>,
    /// Totals.
    pub totals: Totals,
    /// One row per file × location × secret × form.
    pub redactions: Vec<Row>,
    /// Files left out (`--drop-unscannable`) or, when aborted, the files that could not be scrubbed.
    pub unscannable: Vec<Dropped>,
    /// What the verification pass found in the written copy (empty when clean).
    pub leftovers: Vec<Leftover>,
    /// How the copy was verified.
    pub verification: Verification,
}

/// One secret in the report: its name, where it came from, and how many needles it expanded to.
#[derive(Debug, Clone, Serialize)]
pub struct SecretSummary {
    /// Display name.
    pub name: String,
    /// The flag or file it came from.
    pub origin: String,
    /// Distinct encoded forms searched for.
    pub forms_searched: usize,
}

/// Totals over the whole copy.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    /// Regular files read from the input.
    pub files: u64,
    /// Bytes read from the input.
    pub bytes: u64,
    /// Occurrences replaced.
    pub redactions: u64,
}

/// Occurrences of one secret in one form at one place.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Output-relative path; `a.tar.gz!dir/f` inside archives.
    pub path: String,
    /// Content, name or symlink target.
    pub location: Location,
    /// Secret name.
    pub secret: String,
    /// Form label, e.g. `base64-std-1`.
    pub form: String,
    /// True when line breaks or ANSI codes sat inside the occurrences.
    pub split: bool,
    /// How many.
    pub count: u64,
}

/// The verification pass.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verification {
    /// Bytes re-read from the written copy.
    pub bytes_read: u64,
    /// Literal needles searched for.
    pub needles: usize,
    /// Whether the provider-key pattern scan ran.
    pub provider_key_scan: bool,
}

impl Report {
    /// Assembles a report from the pieces of a run.
    pub fn new(secrets: &SecretSet, matcher: &Matcher, findings: &Findings) -> Self {
        let summaries = secrets
            .secrets
            .iter()
            .enumerate()
            .map(|(i, s)| SecretSummary {
                name: matcher.names()[i].clone(),
                origin: s.origin.clone(),
                forms_searched: matcher.needles().iter().filter(|n| n.secret == i).count(),
            })
            .collect();
        let mut rows = Vec::new();
        for ((path, location), tally) in &findings.entries {
            for (hit, count) in tally {
                rows.push(Row {
                    path: path.clone(),
                    location: *location,
                    secret: matcher.names()[hit.secret].clone(),
                    form: hit.form.label(),
                    split: hit.split,
                    count: *count,
                });
            }
        }
        Report {
            schema_version: 1,
            outcome: "clean",
            tool: format!("runner scrub {}", env!("CARGO_PKG_VERSION")),
            secrets: summaries,
            skipped_benign: secrets.skipped_benign.clone(),
            totals: Totals {
                redactions: rows.iter().map(|r| r.count).sum(),
                ..Totals::default()
            },
            redactions: rows,
            unscannable: Vec::new(),
            leftovers: Vec::new(),
            verification: Verification {
                needles: matcher.needles().len(),
                ..Verification::default()
            },
        }
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("the report serialises");
        out.push(b'\n');
        out
    }
}
