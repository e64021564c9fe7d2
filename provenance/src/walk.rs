//! Enumerating a source tree: sorted byte-wise by relative path, symlinks recorded, never followed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::ProvenanceError;
use crate::exclude::{ExcludeRules, ExcludedSummary};

/// What kind of entry a source path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory (stored so empty directories survive).
    Dir,
    /// A regular file; `executable` is the owner exec bit, the only mode bit kept.
    File {
        /// Owner exec bit set.
        executable: bool,
    },
    /// A symlink, stored as a link to `target` (never followed).
    Symlink {
        /// The link target as written.
        target: String,
    },
}

/// One entry of the upload set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    /// '/'-separated path relative to the root.
    pub rel_path: String,
    /// The absolute path on the host.
    pub abs_path: PathBuf,
    /// Its kind.
    pub kind: EntryKind,
}

/// The upload set of a tree and what the rules excluded.
#[derive(Debug, Clone)]
pub struct SourceTree {
    /// The root directory.
    pub root: PathBuf,
    /// Entries sorted by the bytes of `rel_path` (a directory precedes its contents).
    pub entries: Vec<SourceEntry>,
    /// What was excluded.
    pub excluded: ExcludedSummary,
}

/// Walks `root`, applying `rules`; excluded directories are not descended into.
pub fn collect(root: &Path, rules: &ExcludeRules) -> Result<SourceTree, ProvenanceError> {
    let meta = std::fs::metadata(root).map_err(|e| ProvenanceError::io(root, e))?;
    if !meta.is_dir() {
        return Err(ProvenanceError::io(
            root,
            std::io::Error::other("not a directory"),
        ));
    }
    let mut entries = Vec::new();
    let mut excluded = ExcludedSummary {
        rules: rules.rules(),
        ..Default::default()
    };
    walk_dir(root, "", rules, &mut entries, &mut excluded)?;
    entries.sort_by(|a, b| a.rel_path.as_bytes().cmp(b.rel_path.as_bytes()));
    Ok(SourceTree {
        root: root.to_path_buf(),
        entries,
        excluded,
    })
}

fn walk_dir(
    dir: &Path,
    prefix: &str,
    rules: &ExcludeRules,
    entries: &mut Vec<SourceEntry>,
    excluded: &mut ExcludedSummary,
) -> Result<(), ProvenanceError> {
    let reader = std::fs::read_dir(dir).map_err(|e| ProvenanceError::io(dir, e))?;
    for item in reader {
        let item = item.map_err(|e| ProvenanceError::io(dir, e))?;
        let abs_path = item.path();
        let Some(name) = item.file_name().to_str().map(str::to_owned) else {
            return Err(ProvenanceError::BadPath {
                path: abs_path,
                problem: "the name is not UTF-8",
            });
        };
        if name.contains('\n') {
            return Err(ProvenanceError::BadPath {
                path: abs_path,
                problem: "the name holds a newline",
            });
        }
        let rel_path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if let Some(rule) = rules.matching_rule(&rel_path) {
            *excluded.counts.entry(rule).or_default() += 1;
            excluded.excluded_entry_count += 1;
            continue;
        }
        // symlink_metadata: a symlink is described, never followed.
        let meta =
            std::fs::symlink_metadata(&abs_path).map_err(|e| ProvenanceError::io(&abs_path, e))?;
        let file_type = meta.file_type();
        let kind = if file_type.is_symlink() {
            let target =
                std::fs::read_link(&abs_path).map_err(|e| ProvenanceError::io(&abs_path, e))?;
            let Some(target) = target.to_str().map(str::to_owned) else {
                return Err(ProvenanceError::BadPath {
                    path: abs_path,
                    problem: "the symlink target is not UTF-8",
                });
            };
            EntryKind::Symlink { target }
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File {
                executable: meta.permissions().mode() & 0o100 != 0,
            }
        } else {
            return Err(ProvenanceError::UnsupportedEntry { path: abs_path });
        };
        let is_dir = kind == EntryKind::Dir;
        entries.push(SourceEntry {
            rel_path: rel_path.clone(),
            abs_path: abs_path.clone(),
            kind,
        });
        if is_dir {
            walk_dir(&abs_path, &rel_path, rules, entries, excluded)?;
        }
    }
    Ok(())
}
