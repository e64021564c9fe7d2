//! Enumerating a directory tree: sorted byte-wise by relative path, symlinks recorded, never
//! followed. The walk behind agent source archives, image build contexts and uploads, made by
//! the one tree walker ([`tasks::walk`]) with links kept as links.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{ArchiveError, ProvenanceError};
use crate::exclude::{ExcludeRules, ExcludedSummary};
use tasks::walk::{Entry, Kind, Links, Next, TreeWalk, Visitor, WalkError};

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

/// Decides which entries of a tree the walker leaves out.
pub trait Exclusions {
    /// The rule (as written) that leaves out the entry at `rel_path` ('/'-separated, relative
    /// to the root), or `None` to keep it. `is_dir` is true for a real directory (never for a
    /// symlink to one).
    fn excluding_rule(&self, rel_path: &str, is_dir: bool) -> Option<String>;

    /// True when the contents of the excluded directory `rel_dir` must still be looked at,
    /// because a later rule may take some of them back (`.dockerignore`'s `!` patterns). By
    /// default an excluded directory is never read.
    fn may_reinclude_below(&self, _rel_dir: &str) -> bool {
        false
    }

    /// Every rule, as written, for the summary.
    fn rules(&self) -> Vec<String>;
}

/// Keeps every entry.
pub(crate) struct NoExclusions;

impl Exclusions for NoExclusions {
    fn excluding_rule(&self, _rel_path: &str, _is_dir: bool) -> Option<String> {
        None
    }

    fn rules(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Walks `root`, applying the agent source `rules`; excluded directories are not descended into.
pub fn collect(root: &Path, rules: &ExcludeRules) -> Result<SourceTree, ProvenanceError> {
    Ok(walk_tree(root, rules)?)
}

/// Walks `root` (which must be a directory; it is the only path ever followed if it is a
/// symlink), leaving out what `exclusions` excludes.
pub(crate) fn walk_tree(
    root: &Path,
    exclusions: &dyn Exclusions,
) -> Result<SourceTree, ArchiveError> {
    let meta = std::fs::metadata(root).map_err(|e| ArchiveError::io(root, e))?;
    if !meta.is_dir() {
        return Err(ArchiveError::io(
            root,
            std::io::Error::other("not a directory"),
        ));
    }
    let mut collect = Collect {
        exclusions,
        entries: Vec::new(),
        excluded: ExcludedSummary {
            rules: exclusions.rules(),
            ..Default::default()
        },
    };
    // `Keep`: an archive stores a link as a link, so none is resolved or followed.
    TreeWalk::new(root, Links::Keep)
        .walk(&mut collect)
        .map_err(|stop| stop.into_error(walk_error))?;
    let Collect {
        mut entries,
        excluded,
        ..
    } = collect;
    entries.sort_by(|a, b| a.rel_path.as_bytes().cmp(b.rel_path.as_bytes()));
    Ok(SourceTree {
        root: root.to_path_buf(),
        entries,
        excluded,
    })
}

/// The state of one walk.
struct Collect<'a> {
    exclusions: &'a dyn Exclusions,
    entries: Vec<SourceEntry>,
    excluded: ExcludedSummary,
}

impl Visitor for Collect<'_> {
    type Error = ArchiveError;

    fn visit(&mut self, item: &Entry) -> Result<Next, ArchiveError> {
        let abs_path = &item.path;
        let parent = item.rel.rsplit_once('/').map_or("", |(parent, _)| parent);
        let rel_path = relative_name(parent, &item.name, abs_path)?;
        // The entry's own kind: a symlink is described, never followed.
        let is_dir = item.kind == Kind::Dir;
        if let Some(rule) = self.exclusions.excluding_rule(&rel_path, is_dir) {
            *self.excluded.counts.entry(rule).or_default() += 1;
            self.excluded.excluded_entry_count += 1;
            let look_below = is_dir && self.exclusions.may_reinclude_below(&rel_path);
            return Ok(if look_below { Next::Enter } else { Next::Pass });
        }
        let kind = match item.kind {
            Kind::Link(_) => EntryKind::Symlink {
                target: link_target(abs_path)?,
            },
            Kind::Dir => EntryKind::Dir,
            Kind::File => {
                let meta = std::fs::symlink_metadata(abs_path)
                    .map_err(|e| ArchiveError::io(abs_path, e))?;
                EntryKind::File {
                    executable: meta.permissions().mode() & 0o100 != 0,
                }
            }
            Kind::Special => {
                return Err(ArchiveError::UnsupportedEntry {
                    path: abs_path.clone(),
                });
            }
        };
        self.entries.push(SourceEntry {
            rel_path,
            abs_path: abs_path.clone(),
            kind,
        });
        Ok(Next::Enter)
    }
}

/// A walker's error as an archive's.
fn walk_error(e: WalkError) -> ArchiveError {
    match e {
        WalkError::Io { path, source } => ArchiveError::io(path, source),
        other => ArchiveError::io(walk_path(&other), std::io::Error::other(other.to_string())),
    }
}

/// Where a walker's error happened.
fn walk_path(e: &WalkError) -> PathBuf {
    match e {
        WalkError::Io { path, .. } | WalkError::TooDeep { path, .. } => path.clone(),
        WalkError::OutOfRoot { link, .. } | WalkError::Loop { link, .. } => link.clone(),
        WalkError::TooManyEntries { start, .. } => start.clone(),
    }
}

/// `prefix/name`, refusing names that cannot be stored reproducibly.
fn relative_name(
    prefix: &str,
    name: &std::ffi::OsStr,
    abs_path: &Path,
) -> Result<String, ArchiveError> {
    let Some(name) = name.to_str() else {
        return Err(ArchiveError::BadPath {
            path: abs_path.to_path_buf(),
            problem: "the name is not UTF-8",
        });
    };
    if name.contains('\n') {
        return Err(ArchiveError::BadPath {
            path: abs_path.to_path_buf(),
            problem: "the name holds a newline",
        });
    }
    Ok(if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    })
}

fn link_target(abs_path: &Path) -> Result<String, ArchiveError> {
    let target = std::fs::read_link(abs_path).map_err(|e| ArchiveError::io(abs_path, e))?;
    target
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| ArchiveError::BadPath {
            path: abs_path.to_path_buf(),
            problem: "the symlink target is not UTF-8",
        })
}
