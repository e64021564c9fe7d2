//! Harbor 0.26's `.harborignore` (`TaskFileFilter`, `harbor/models/task/file_filter.py`): the
//! test and solution inputs a task uploads leave out what its `.harborignore` files exclude.
//!
//! Rules apply only inside `tests/`, `solution/`, `steps/<step>/tests/` and
//! `steps/<step>/solution/`; each `.harborignore` there holds gitignore patterns relative to
//! its directory, and for a path the deepest rule that matches it (or a directory above it)
//! decides. A `.harborignore` file is itself never an input, wherever it is. A link is
//! excluded when its own path is, or when its target lies in the task and is. The same rules
//! leave paths out of [`crate::checksum`].
//!
//! [`TaskFileFilter::select`] gives the directory to upload: the original when it holds no
//! `.harborignore` (nothing to leave out, no copy), else a staged copy without the excluded
//! entries, made by [`stage_tree`] as a step's merged tests are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::error::TaskError;
use crate::walk::{Entry, Escapes, Links, Next, TreeWalk, Visitor, WalkError};

/// The file that excludes test and solution inputs (Harbor's `TaskFileFilter.IGNORE_FILENAME`).
pub const IGNORE_FILE: &str = ".harborignore";

/// The `.harborignore` rules of one task (see the module docs).
#[derive(Debug)]
pub struct TaskFileFilter {
    /// The task directory, resolved.
    root: PathBuf,
    /// Each scoped directory's rules, read once.
    rules: Mutex<HashMap<PathBuf, Arc<Gitignore>>>,
    /// Whether any scoped directory holds a `.harborignore`: when none does (most tasks),
    /// only `.harborignore` files themselves are excluded and no path needs resolving.
    has_rules: bool,
}

/// A directory to upload: the task's own, or a filtered copy kept alive with this value.
#[derive(Debug)]
pub struct Selection {
    /// The directory to upload.
    pub dir: PathBuf,
    /// The staged copy `dir` is in, when anything was left out.
    pub staged: Option<tempfile::TempDir>,
}

impl TaskFileFilter {
    /// The filter of the task in `task_dir`.
    pub fn new(task_dir: &Path) -> Result<Self, TaskError> {
        let root = task_dir
            .canonicalize()
            .map_err(|e| TaskError::io(task_dir, e))?;
        let mut scoped = vec![root.join("tests"), root.join("solution")];
        if let Ok(steps) = std::fs::read_dir(root.join("steps")) {
            for step in steps.flatten() {
                scoped.extend([step.path().join("tests"), step.path().join("solution")]);
            }
        }
        let mut has_rules = false;
        for dir in scoped.iter().filter(|d| d.is_dir()) {
            has_rules |= holds_ignore_file(&root, dir).map_err(|e| TaskError::io(dir, e))?;
        }
        Ok(Self {
            root,
            rules: Mutex::new(HashMap::new()),
            has_rules,
        })
    }

    /// Whether Harbor leaves `path` (in the task) out of the inputs it uploads: a
    /// `.harborignore`, a path the rules exclude, or a link to one inside the task.
    pub fn is_excluded(&self, path: &Path) -> Result<bool, TaskError> {
        if !self.has_rules {
            return Ok(path.file_name().is_some_and(|n| n == IGNORE_FILE));
        }
        // As Harbor's `os.path.abspath`: absolute, links not resolved.
        let path = std::path::absolute(path).map_err(|e| TaskError::io(path, e))?;
        let path = self.in_root(&path);
        if !path.starts_with(&self.root) {
            return Ok(false);
        }
        if self.matches(&path)? {
            return Ok(true);
        }
        match path.canonicalize() {
            Ok(real) if real != path && real.starts_with(&self.root) => self.matches(&real),
            _ => Ok(false),
        }
    }

    /// Refuses a required input (`test.sh`, `solve.sh`) that `.harborignore` excludes, as
    /// Harbor's `require_included` does.
    pub fn require_included(&self, path: &Path) -> Result<(), TaskError> {
        if self.is_excluded(path)? {
            return Err(TaskError::invalid(
                path,
                IGNORE_FILE,
                format!(
                    "this required task input is excluded by a {IGNORE_FILE}; remove the rule that matches it"
                ),
            ));
        }
        Ok(())
    }

    /// The directory to upload for `dir` (the tests or a solution): `dir` itself when no
    /// `.harborignore` lies in it (or it does not exist: the caller says what is missing),
    /// else a staged copy without what the rules exclude.
    pub fn select(&self, dir: &Path) -> Result<Selection, TaskError> {
        if !dir.is_dir()
            || !holds_ignore_file(&self.root, dir).map_err(|e| TaskError::io(dir, e))?
        {
            return Ok(Selection {
                dir: dir.to_owned(),
                staged: None,
            });
        }
        let staged = stage_tree(&self.root, &[dir.to_owned()], Some(self))
            .map_err(|e| TaskError::io(dir, e))?;
        Ok(Selection {
            dir: staged.path().to_owned(),
            staged: Some(staged),
        })
    }

    /// `path` with the task directory as given replaced by the resolved root, so a task
    /// loaded through a link to its directory is still matched.
    fn in_root(&self, path: &Path) -> PathBuf {
        if path.starts_with(&self.root) {
            return path.to_owned();
        }
        for ancestor in path.ancestors() {
            if let Ok(mut resolved) = ancestor.canonicalize()
                && resolved == self.root
            {
                if let Ok(rest) = path.strip_prefix(ancestor) {
                    resolved.push(rest);
                }
                return resolved;
            }
        }
        path.to_owned()
    }

    /// Harbor's `_matches`: `path` (under the root) is a `.harborignore`, or it or a directory
    /// above it is excluded by the rules of the scoped directories above it.
    fn matches(&self, path: &Path) -> Result<bool, TaskError> {
        if path.file_name().is_some_and(|n| n == IGNORE_FILE) {
            return Ok(true);
        }
        let is_dir = path.is_dir();
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return Ok(false);
        };
        if !in_scope(&crate::digest::posix_relative(&self.root, path), is_dir) {
            return Ok(false);
        }
        let parts: Vec<_> = rel.components().collect();
        let mut rules: Vec<Arc<Gitignore>> = Vec::new();
        let mut candidate = self.root.clone();
        for (i, part) in parts.iter().enumerate() {
            if in_scope(&crate::digest::posix_relative(&self.root, &candidate), true) {
                rules.push(self.rules_of(&candidate)?);
            }
            candidate.push(part);
            let candidate_is_dir = i + 1 < parts.len() || is_dir;
            let rel = crate::digest::posix_relative(&self.root, &candidate);
            if in_scope(&rel, candidate_is_dir) && excluded_by(&rules, &candidate, candidate_is_dir)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The rules of `dir/.harborignore`, read once.
    fn rules_of(&self, dir: &Path) -> Result<Arc<Gitignore>, TaskError> {
        let mut cache = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rules) = cache.get(dir) {
            return Ok(rules.clone());
        }
        let rules = Arc::new(harborignore(dir)?);
        cache.insert(dir.to_owned(), rules.clone());
        Ok(rules)
    }
}

/// Whether `rules` (shallowest first) exclude `path`: the deepest rule matching it decides.
pub(crate) fn excluded_by(rules: &[Arc<Gitignore>], path: &Path, is_dir: bool) -> bool {
    rules
        .iter()
        .rev()
        .find_map(|rule| {
            let m = rule.matched(path, is_dir);
            (!m.is_none()).then(|| m.is_ignore())
        })
        .unwrap_or(false)
}

/// Whether the task-relative path `rel` lies where `.harborignore` rules apply: `tests/`,
/// `solution/`, `steps/<step>/tests/` or `steps/<step>/solution/`, or under one of them.
pub(crate) fn in_scope(rel: &str, is_dir: bool) -> bool {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    // A file directly named `tests` is not the tests directory.
    let scoped_at = |n: usize| parts.len() > n || is_dir;
    match parts.as_slice() {
        ["tests" | "solution", ..] => scoped_at(1),
        ["steps", _, "tests" | "solution", ..] => scoped_at(3),
        _ => false,
    }
}

/// The rules of `dir/.harborignore` (none when it has none), rooted at `dir`.
pub(crate) fn harborignore(dir: &Path) -> Result<Gitignore, TaskError> {
    let path = dir.join(IGNORE_FILE);
    let mut builder = GitignoreBuilder::new(dir);
    if path.is_file()
        && let Some(err) = builder.add(&path)
    {
        return Err(TaskError::invalid(&path, "(pattern)", err.to_string()));
    }
    builder
        .build()
        .map_err(|e| TaskError::invalid(&path, "(pattern)", e.to_string()))
}

/// Whether a `.harborignore` lies anywhere in `dir` (inside the task directory `root`),
/// through links to directories of the task too (their rules apply to what is reached through
/// them; a link out of the task is not followed): when none does, `dir` is uploaded as it is.
pub fn holds_ignore_file(root: &Path, dir: &Path) -> std::io::Result<bool> {
    struct Search(bool);
    impl Visitor for Search {
        type Error = std::io::Error;
        fn visit(&mut self, entry: &Entry) -> Result<Next, Self::Error> {
            self.0 = entry.name == IGNORE_FILE;
            Ok(if self.0 { Next::Stop } else { Next::Enter })
        }
    }
    let mut search = Search(false);
    // `Follow` with `Skip`: only a question is asked here, so a link out of the task (or
    // back up) is passed over; the load's check and the staged copy refuse it.
    TreeWalk::new(dir, Links::Follow)
        .confined_to(root)
        .escapes(Escapes::Skip)
        .walk(&mut search)
        .map_err(|stop| stop.into_error(walk_to_io))?;
    Ok(search.0)
}

/// A temporary directory holding `dirs` (inside the task directory `root`) copied in order, a
/// later file replacing an earlier one of the same path, leaving out what `filter` excludes.
/// Files keep their permissions. A link is followed only to a regular file or directory
/// inside `root`: the task load refused any other ([`crate::confined`]), and this copy, made
/// later, does not trust that nothing changed since; a link out of the task would copy host
/// files (`/proc/self/environ`) into the container.
pub fn stage_tree(
    root: &Path,
    dirs: &[PathBuf],
    filter: Option<&TaskFileFilter>,
) -> std::io::Result<tempfile::TempDir> {
    let root = root.canonicalize()?;
    let staged = tempfile::Builder::new()
        .prefix("runner-inputs-")
        .tempdir()?;
    for dir in dirs {
        std::fs::create_dir_all(staged.path())?;
        let mut copy = Copy {
            filter,
            from: vec![dir.clone()],
            to: vec![staged.path().to_owned()],
        };
        // `Follow` with `Refuse`: a link inside the task is copied as what it leads to, and one
        // out of it (or back up) fails the copy rather than carry a host file in.
        TreeWalk::new(dir, Links::Follow)
            .confined_to(&root)
            .walk(&mut copy)
            .map_err(|stop| stop.into_error(walk_to_io))?;
    }
    Ok(staged)
}

/// One staged copy: the real directory being read and the one being written.
struct Copy<'a> {
    filter: Option<&'a TaskFileFilter>,
    /// The directories read, resolved below the first (the filter sees each entry in the
    /// real directory that holds it, as a link's target is).
    from: Vec<PathBuf>,
    to: Vec<PathBuf>,
}

impl Visitor for Copy<'_> {
    type Error = std::io::Error;

    fn visit(&mut self, entry: &Entry) -> std::io::Result<Next> {
        let (Some(from), Some(to)) = (self.from.last(), self.to.last()) else {
            return Ok(Next::Stop);
        };
        let path = from.join(&entry.name);
        if let Some(filter) = self.filter
            && filter.is_excluded(&path).map_err(std::io::Error::other)?
        {
            return Ok(Next::Pass);
        }
        let target = to.join(&entry.name);
        if entry.is_dir() {
            std::fs::create_dir_all(&target)?;
            self.from.push(path.canonicalize()?);
            self.to.push(target);
        } else if entry.is_file() {
            std::fs::copy(&entry.path, &target)?;
        } else {
            // A dangling link says why it cannot be read; anything else is no file of the task.
            let source = path.canonicalize()?;
            return Err(not_the_tasks(&path, &source));
        }
        Ok(Next::Enter)
    }

    fn leave(&mut self, _dir: &Entry) -> std::io::Result<()> {
        self.from.pop();
        self.to.pop();
        Ok(())
    }
}

fn not_the_tasks(path: &Path, source: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "{} leads to {}, which is not a file or directory of the task; a task's inputs must be its own files",
            path.display(),
            source.display()
        ),
    )
}

/// A walker's error as the staged copy's: a link out of the task is not the task's.
fn walk_to_io(e: WalkError) -> std::io::Error {
    match e {
        WalkError::Io { source, .. } => source,
        WalkError::OutOfRoot { link, target, .. } => not_the_tasks(&link, &target),
        other => std::io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
#[path = "file_filter_tests.rs"]
mod tests;
