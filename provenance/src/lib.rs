//! Deterministic tar archives of host directories, and source-provenance records.
//!
//! One walker and one tar writer serve three callers:
//! - agent sources ([`package_source`]): archived with exclude rules, checked for known
//!   secrets, and described by an in-toto provenance record (digests and git state as counts,
//!   never diffs or secrets);
//! - image build contexts ([`build_context`], [`write_build_context`]): `.dockerignore`
//!   honoured, see [`DockerIgnore`];
//! - uploads into a container ([`pack_dir`], [`write_dir`]): a host directory's contents
//!   under a container path.
//!
//! All of them store symlinks as symlinks and never follow them, and produce the same bytes
//! for the same content whatever the mtimes, owners or group/other mode bits.

mod archive;
mod dockerignore;
mod error;
mod exclude;
mod git;
mod pack;
mod record;
mod secret_scan;
mod tree_digest;
mod walk;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use archive::{ArchiveCounts, SourceArchive, build_tar, gzip};
pub use dockerignore::DockerIgnore;
pub use error::{ArchiveError, ProvenanceError};
pub use exclude::{DEFAULT_EXCLUDES, ExcludeRules, ExcludedSummary};
pub use git::{
    DirtyCounts, GitState, GitUnavailable, git_state, parse_porcelain_v2, strip_credentials,
};
pub use pack::{build_context, pack_dir, write_build_context, write_dir};
pub use record::{
    ArchiveInfo, Generator, PREDICATE_TYPE, Predicate, SecretCheck, SourceInfo, SourceProvenance,
    Subject,
};
pub use secret_scan::check_tree;
pub use tree_digest::tree_digest;
pub use walk::{EntryKind, Exclusions, SourceEntry, SourceTree, collect};

/// The runner version recorded as the generator of every provenance record. Every crate of
/// the workspace takes its version from the workspace (`version.workspace = true`), so this is
/// `tasks::RUNNER_VERSION` without depending on `tasks` for one constant; a test in the adapter,
/// which depends on both, checks that they agree.
pub const GENERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What to package and how.
#[derive(Debug, Clone, Default)]
pub struct SourceOptions {
    /// The source directory.
    pub root: PathBuf,
    /// User exclude globs, on top of [`DEFAULT_EXCLUDES`].
    pub extra_excludes: Vec<String>,
    /// `(variable name, value)` pairs that must not appear in any uploaded file (the host's
    /// credential variables and the agent env).
    pub known_secrets: Vec<(String, String)>,
    /// Refuse a tree with uncommitted changes instead of recording them.
    pub require_clean: bool,
}

/// A packaged source tree: the gzipped tar to upload and its provenance record.
#[derive(Debug, Clone)]
pub struct PackagedSource {
    /// The gzipped deterministic tar.
    pub tar_gz: Vec<u8>,
    /// The record to write as `agent/source-provenance.json`.
    pub provenance: SourceProvenance,
}

/// Walks, checks, archives and describes `options.root`.
pub fn package_source(options: &SourceOptions) -> Result<PackagedSource, ProvenanceError> {
    let root =
        std::path::absolute(&options.root).map_err(|e| ProvenanceError::io(&options.root, e))?;
    let rules = ExcludeRules::new(&options.extra_excludes)?;
    let tree = collect(&root, &rules)?;
    let known_values_checked = check_tree(&tree, &options.known_secrets)?;
    let (vcs, vcs_note, git) = match git_state(&root) {
        Ok(state) => ("git", None, Some(state)),
        Err(GitUnavailable::NotARepository) => ("none", None, None),
        Err(GitUnavailable::GitMissing(e)) => {
            ("unknown", Some(format!("git could not be run: {e}")), None)
        }
        Err(GitUnavailable::Failed(e)) => ("unknown", Some(format!("git failed: {e}")), None),
    };
    if options.require_clean {
        match &git {
            Some(state) if state.dirty => {
                return Err(ProvenanceError::DirtySource {
                    root,
                    summary: state.counts.summary(),
                });
            }
            Some(_) => {}
            None => {
                return Err(ProvenanceError::DirtySource {
                    root,
                    summary: "its git state cannot be read, so it cannot be shown to be clean"
                        .into(),
                });
            }
        }
    }
    let archive = build_tar(&tree)?;
    let tree_digest = tree_digest(&tree)?;
    let tar_gz = gzip(&archive.tar)?;
    let provenance = SourceProvenance {
        statement_type: "https://in-toto.io/Statement/v1".into(),
        subject: vec![
            Subject {
                name: "agent-source.tar".into(),
                digest: BTreeMap::from([("sha256".into(), archive.sha256.clone())]),
            },
            Subject {
                name: "agent-source-tree".into(),
                digest: BTreeMap::from([("dirHash1".into(), tree_digest.clone())]),
            },
        ],
        predicate_type: PREDICATE_TYPE.into(),
        predicate: Predicate {
            schema_version: 1,
            generator: Generator {
                name: "runner".into(),
                version: GENERATOR_VERSION.into(),
            },
            source: SourceInfo {
                local_root_name: root_name(&root),
                vcs: vcs.into(),
                vcs_note,
                git,
            },
            archive: ArchiveInfo {
                sha256: archive.sha256,
                tree_digest,
                format: "gnu tar".into(),
                ordering: "byte-wise sorted relative paths, '/'-separated".into(),
                mtime: 1_153_704_088,
                uid: 0,
                gid: 0,
                modes: "0644, or 0755 for directories and files with the owner exec bit".into(),
                symlinks: "stored as symlinks, never followed".into(),
                transport: "gzip, mtime 0".into(),
                file_count: archive.file_count,
                dir_count: archive.dir_count,
                symlink_count: archive.symlink_count,
                total_bytes: archive.total_bytes,
            },
            excluded: tree.excluded,
            secret_check: SecretCheck {
                known_values_checked,
                hits: 0,
            },
        },
    };
    Ok(PackagedSource { tar_gz, provenance })
}

fn root_name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
