//! The one walker of the runner's file trees: task directories (digests, checksums, the load's
//! check, staging, `.harborignore` search), agent source trees and build contexts, registry
//! cache entries, job directories.
//!
//! **The link rule**, the one security property every caller relies on: a link is never
//! followed out of the walk's root. Under [`Links::Keep`] no link is resolved at all (it is
//! reported as a link). Under [`Links::ToFiles`] and [`Links::Follow`] every link is resolved
//! before the visitor sees it; a link whose target lies outside the root, or (followed) leads
//! back to a directory above it, is refused with [`WalkError::OutOfRoot`] or
//! [`WalkError::Loop`], or left out without a word under [`Escapes::Skip`]. A link that leads
//! nowhere is reported as [`LinkTo::Dangling`]; a FIFO, socket or device (or a link to one) is
//! reported as such and never opened. A walk reads at most [`Limits::entries`] entries and goes
//! at most [`Limits::depth`] directories deep ([`WalkError::TooManyEntries`],
//! [`WalkError::TooDeep`]), so no tree, however made, keeps it going.
//!
//! Order: each directory's entries in byte order of their names, a directory's contents right
//! after it (pre-order). Callers that need another order (the byte order of whole paths) sort
//! what they collect.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Most entries one walk reads: far above any task, build context or job directory, low enough
/// that a walk ends in seconds.
pub const MAX_ENTRIES: usize = 1_000_000;
/// Deepest directory level one walk enters.
pub const MAX_DEPTH: usize = 128;

/// How a walk treats links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Never resolved: a link is reported as [`LinkTo::Unresolved`] (copies and archives that
    /// keep links as links).
    Keep,
    /// Resolved inside the root; a link to a file reads as the file, a link to a directory is
    /// reported but never entered (Harbor's packager, as Python's `rglob`).
    ToFiles,
    /// Resolved inside the root and followed, into directories too (dirhash, staged copies).
    Follow,
}

/// What a resolved link that leads out of the root, or back above itself, does to the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escapes {
    /// Ends the walk with [`WalkError::OutOfRoot`] or [`WalkError::Loop`].
    Refuse,
    /// Leaves the link out: the visitor never sees it.
    Skip,
}

/// The bounds of one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entries read, over the whole walk.
    pub entries: usize,
    /// Deepest entry: 1 is the root's own entries.
    pub depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            entries: MAX_ENTRIES,
            depth: MAX_DEPTH,
        }
    }
}

/// What an entry is, read without following it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A FIFO, socket or device.
    Special,
    /// A symbolic link, and where it leads.
    Link(LinkTo),
}

/// Where a link leads (the targets are canonical and inside the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkTo {
    /// Not resolved ([`Links::Keep`]).
    Unresolved,
    /// To nothing.
    Dangling,
    /// To a regular file.
    File(PathBuf),
    /// To a directory.
    Dir(PathBuf),
    /// To a FIFO, socket or device.
    Special(PathBuf),
}

/// One entry of the tree.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name.
    pub name: OsString,
    /// Its path relative to the walk's start, `/`-separated (names lossily as UTF-8).
    pub rel: String,
    /// Its path relative to the walk's start, exactly.
    pub rel_path: PathBuf,
    /// The start as given joined with its names: links on the way are not resolved.
    pub path: PathBuf,
    /// How many directories down: 1 for an entry of the start.
    pub depth: usize,
    /// What it is.
    pub kind: Kind,
}

impl Entry {
    /// A directory, or a link resolved to one.
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir | Kind::Link(LinkTo::Dir(_)))
    }

    /// A regular file, or a link resolved to one.
    pub fn is_file(&self) -> bool {
        matches!(self.kind, Kind::File | Kind::Link(LinkTo::File(_)))
    }
}

/// What the walk does after the visitor has seen an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Go on, entering the entry when it is a directory the walk may enter.
    Enter,
    /// Go on without entering it.
    Pass,
    /// End the walk (successfully).
    Stop,
}

/// What a caller does with each entry.
pub trait Visitor {
    /// The caller's own error.
    type Error;
    /// Sees one entry, in walk order.
    fn visit(&mut self, entry: &Entry) -> Result<Next, Self::Error>;
    /// Called after the contents of a directory the walk entered (and only then).
    fn leave(&mut self, _dir: &Entry) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Why a walk ended early: the walker's rule, or the visitor.
#[derive(Debug)]
pub enum Stopped<E> {
    /// The walker refused the tree or could not read it.
    Walk(WalkError),
    /// The visitor returned an error.
    Visitor(E),
}

impl<E> Stopped<E> {
    /// The caller's error, with `walk` saying what a walker error means to it.
    pub fn into_error(self, walk: impl FnOnce(WalkError) -> E) -> E {
        match self {
            Stopped::Walk(e) => walk(e),
            Stopped::Visitor(e) => e,
        }
    }
}

impl<E: From<WalkError>> Stopped<E> {
    /// The caller's error, walker errors converted the usual way.
    pub fn into_inner(self) -> E {
        self.into_error(E::from)
    }
}

/// A walk the walker refuses or cannot make.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// A directory or entry could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A link (or the start) leads out of the root.
    #[error("{}: a link to {}, outside {}", link.display(), target.display(), root.display())]
    OutOfRoot {
        /// The link as reached.
        link: PathBuf,
        /// Its canonical target.
        target: PathBuf,
        /// The root, canonical.
        root: PathBuf,
    },
    /// A followed link leads back to a directory above it: the walk would not end.
    #[error("{}: a directory link back to {}, a directory above it", link.display(), target.display())]
    Loop {
        /// The link as reached.
        link: PathBuf,
        /// The directory it leads back to.
        target: PathBuf,
    },
    /// The tree holds more entries than the walk reads.
    #[error("{}: more than {limit} entries; a tree this large is not walked", start.display())]
    TooManyEntries {
        /// The walk's start.
        start: PathBuf,
        /// The bound.
        limit: usize,
    },
    /// The tree goes deeper than the walk enters.
    #[error("{}: more than {limit} directories deep; a tree this deep is not walked", path.display())]
    TooDeep {
        /// The first entry below the bound.
        path: PathBuf,
        /// The bound.
        limit: usize,
    },
}

impl WalkError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WalkError {
        let path = path.to_owned();
        move |source| WalkError::Io { path, source }
    }
}

/// One walk: where it starts, what confines it, and its options.
#[derive(Debug, Clone)]
pub struct TreeWalk<'a> {
    start: &'a Path,
    root: &'a Path,
    links: Links,
    escapes: Escapes,
    limits: Limits,
}

impl<'a> TreeWalk<'a> {
    /// A walk of `start`, confined to it, links handled as `links`, escaping links refused.
    pub fn new(start: &'a Path, links: Links) -> Self {
        Self {
            start,
            root: start,
            links,
            escapes: Escapes::Refuse,
            limits: Limits::default(),
        }
    }

    /// Confines the walk to `root`, a directory at or above the start: the start itself must
    /// lead inside it.
    pub fn confined_to(mut self, root: &'a Path) -> Self {
        self.root = root;
        self
    }

    /// Sets what an escaping link does.
    pub fn escapes(mut self, escapes: Escapes) -> Self {
        self.escapes = escapes;
        self
    }

    /// Sets the bounds.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Walks the tree, showing `visitor` each entry in order.
    pub fn walk<V: Visitor>(&self, visitor: &mut V) -> Result<(), Stopped<V::Error>> {
        let mut state = State {
            root: PathBuf::new(),
            above: Vec::new(),
            read: 0,
        };
        if self.links != Links::Keep {
            state.root = canonical(self.root).map_err(Stopped::Walk)?;
            let start = canonical(self.start).map_err(Stopped::Walk)?;
            if !start.starts_with(&state.root) {
                return match self.escapes {
                    Escapes::Skip => Ok(()),
                    Escapes::Refuse => Err(Stopped::Walk(WalkError::OutOfRoot {
                        link: self.start.to_owned(),
                        target: start,
                        root: state.root,
                    })),
                };
            }
            state.above.push(start);
        }
        self.dir(self.start, Path::new(""), 1, &mut state, visitor)
            .map(|_| ())
    }

    /// Walks the entries of `dir`; `Ok(false)` when the visitor stopped the walk.
    fn dir<V: Visitor>(
        &self,
        dir: &Path,
        prefix: &Path,
        depth: usize,
        state: &mut State,
        visitor: &mut V,
    ) -> Result<bool, Stopped<V::Error>> {
        let mut names: Vec<OsString> = std::fs::read_dir(dir)
            .and_then(|entries| entries.map(|e| e.map(|e| e.file_name())).collect())
            .map_err(|e| Stopped::Walk(WalkError::io(dir)(e)))?;
        names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        for name in names {
            let path = dir.join(&name);
            state.read += 1;
            if state.read > self.limits.entries {
                return Err(Stopped::Walk(WalkError::TooManyEntries {
                    start: self.start.to_owned(),
                    limit: self.limits.entries,
                }));
            }
            if depth > self.limits.depth {
                return Err(Stopped::Walk(WalkError::TooDeep {
                    path,
                    limit: self.limits.depth,
                }));
            }
            let Some(kind) = self.kind(&path, state).map_err(Stopped::Walk)? else {
                continue;
            };
            let rel_path = prefix.join(&name);
            let rel = rel_path.to_string_lossy().into_owned();
            let entry = Entry {
                name,
                rel,
                rel_path,
                path,
                depth,
                kind,
            };
            match visitor.visit(&entry).map_err(Stopped::Visitor)? {
                Next::Stop => return Ok(false),
                Next::Pass => continue,
                Next::Enter => {}
            }
            let real = match &entry.kind {
                Kind::Dir => state.above.last().map(|d| d.join(&entry.name)),
                Kind::Link(LinkTo::Dir(target)) if self.links == Links::Follow => {
                    Some(target.clone())
                }
                _ => continue,
            };
            state.above.extend(real);
            let go_on = self.dir(&entry.path, &entry.rel_path, depth + 1, state, visitor)?;
            if self.links != Links::Keep {
                state.above.pop();
            }
            if !go_on {
                return Ok(false);
            }
            visitor.leave(&entry).map_err(Stopped::Visitor)?;
        }
        Ok(true)
    }

    /// What `path` is; `None` when it is an escaping link the walk skips.
    fn kind(&self, path: &Path, state: &State) -> Result<Option<Kind>, WalkError> {
        let meta = std::fs::symlink_metadata(path).map_err(WalkError::io(path))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            return Ok(Some(Kind::Dir));
        } else if kind.is_file() {
            return Ok(Some(Kind::File));
        } else if !kind.is_symlink() {
            return Ok(Some(Kind::Special));
        } else if self.links == Links::Keep {
            return Ok(Some(Kind::Link(LinkTo::Unresolved)));
        }
        let to = match resolve_inside(&state.root, path) {
            Ok(LinkTo::Dir(target))
                if self.links == Links::Follow && state.above.contains(&target) =>
            {
                Err(WalkError::Loop {
                    link: path.to_owned(),
                    target,
                })
            }
            other => other,
        };
        match (to, self.escapes) {
            (Ok(to), _) => Ok(Some(Kind::Link(to))),
            (Err(WalkError::OutOfRoot { .. } | WalkError::Loop { .. }), Escapes::Skip) => Ok(None),
            (Err(e), _) => Err(e),
        }
    }
}

/// The state of one walk.
struct State {
    /// The root, canonical (unset under [`Links::Keep`]).
    root: PathBuf,
    /// The canonical directories from the start down to the one being read (unset under
    /// [`Links::Keep`], where nothing can loop).
    above: Vec<PathBuf>,
    /// Entries read so far.
    read: usize,
}

/// Where `path` leads, when inside `root` (canonical): the link rule's one statement.
/// [`LinkTo::Dangling`] when it leads nowhere; [`WalkError::OutOfRoot`] when outside.
pub fn resolve_inside(root: &Path, path: &Path) -> Result<LinkTo, WalkError> {
    let Ok(target) = path.canonicalize() else {
        return Ok(LinkTo::Dangling);
    };
    if !target.starts_with(root) {
        return Err(WalkError::OutOfRoot {
            link: path.to_owned(),
            target,
            root: root.to_owned(),
        });
    }
    let meta = std::fs::metadata(&target).map_err(WalkError::io(&target))?;
    Ok(if meta.is_dir() {
        LinkTo::Dir(target)
    } else if meta.is_file() {
        LinkTo::File(target)
    } else {
        LinkTo::Special(target)
    })
}

fn canonical(path: &Path) -> Result<PathBuf, WalkError> {
    path.canonicalize().map_err(WalkError::io(path))
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;
