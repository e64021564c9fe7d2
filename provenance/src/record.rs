//! `source-provenance.json`: an in-toto Statement v1 whose subjects are the uploaded tar and the
//! file tree. It holds no timestamps or trial ids, so the same tree always gives the same record.

use serde::Serialize;

use crate::exclude::ExcludedSummary;
use crate::git::GitState;

/// The predicate type naming this record's schema (project-owned; not an SLSA claim).
pub const PREDICATE_TYPE: &str = "https://runner.invalid/agent-source-provenance/v1";

/// The whole record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SourceProvenance {
    /// in-toto statement type.
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// The tar stream and the file tree, by digest.
    pub subject: Vec<Subject>,
    /// [`PREDICATE_TYPE`].
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// The facts.
    pub predicate: Predicate,
}

impl SourceProvenance {
    /// True when git reports uncommitted changes in the source directory.
    pub fn is_dirty(&self) -> bool {
        self.predicate.source.git.as_ref().is_some_and(|g| g.dirty)
    }

    /// The sha256 of the uncompressed tar.
    pub fn tar_sha256(&self) -> &str {
        &self.predicate.archive.sha256
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("provenance record serialises");
        text.push('\n');
        text
    }
}

/// One subject: a name and a digest set.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Subject {
    /// `agent-source.tar` or `agent-source-tree`.
    pub name: String,
    /// `{"sha256": ...}` or `{"dirHash1": ...}`.
    pub digest: std::collections::BTreeMap<String, String>,
}

/// The facts about the source.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Predicate {
    /// This record's schema version.
    pub schema_version: u32,
    /// The tool that wrote it.
    pub generator: Generator,
    /// Where the source came from.
    pub source: SourceInfo,
    /// How the tar was built.
    pub archive: ArchiveInfo,
    /// What was left out.
    pub excluded: ExcludedSummary,
    /// The known-secret check.
    pub secret_check: SecretCheck,
}

/// The tool that wrote the record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Generator {
    /// `runner`.
    pub name: String,
    /// [`crate::GENERATOR_VERSION`], the runner's version.
    pub version: String,
}

/// The source directory and its version control state.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SourceInfo {
    /// The last component of the source directory (not the full host path).
    pub local_root_name: String,
    /// `git`, `none` (not a repository) or `unknown` (git could not be run).
    pub vcs: String,
    /// Why the git state is missing, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vcs_note: Option<String>,
    /// Git facts: counts only, never diffs, contents or untracked names.
    pub git: Option<GitState>,
}

/// How the uploaded tar was built, so anyone can rebuild and compare it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ArchiveInfo {
    /// Lowercase hex sha256 of the uncompressed tar (also subject 1).
    pub sha256: String,
    /// Lowercase hex Go `dirHash1` of the regular files (also subject 2).
    pub tree_digest: String,
    /// Header format.
    pub format: String,
    /// Entry order.
    pub ordering: String,
    /// The fixed mtime of every entry.
    pub mtime: u64,
    /// Owner ids.
    pub uid: u64,
    /// Group id.
    pub gid: u64,
    /// Mode rule.
    pub modes: String,
    /// Symlink rule.
    pub symlinks: String,
    /// Transport encoding (the digest is of the uncompressed tar).
    pub transport: String,
    /// Regular files stored.
    pub file_count: u64,
    /// Directories stored.
    pub dir_count: u64,
    /// Symlinks stored.
    pub symlink_count: u64,
    /// Sum of file sizes.
    pub total_bytes: u64,
}

/// The known-secret check's outcome (a record only exists when it found nothing).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SecretCheck {
    /// How many known credential values were searched for.
    pub known_values_checked: usize,
    /// Always 0: a hit refuses the upload.
    pub hits: usize,
}
