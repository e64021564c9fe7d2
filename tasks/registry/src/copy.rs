//! Copying a task tree (files with their modes, directories, symlinks as links), for cache
//! entries and `runner datasets download`.

use std::path::{Path, PathBuf};

use tasks::walk::{Entry, Kind, Links, Next, TreeWalk, Visitor};

/// Copies the tree at `from` to `to` (which must not exist).
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    // `Keep`: a cache entry is the tree as it is, a link copied as a link, never followed.
    TreeWalk::new(from, Links::Keep)
        .walk(&mut Copy { to: to.to_owned() })
        .map_err(|stop| stop.into_error(walk_to_io))
}

/// Where the copy goes.
struct Copy {
    to: PathBuf,
}

impl Visitor for Copy {
    type Error = std::io::Error;

    fn visit(&mut self, entry: &Entry) -> std::io::Result<Next> {
        let dst = self.to.join(&entry.rel_path);
        match entry.kind {
            Kind::Link(_) => std::os::unix::fs::symlink(std::fs::read_link(&entry.path)?, &dst)?,
            Kind::Dir => std::fs::create_dir(&dst)?,
            _ => {
                std::fs::copy(&entry.path, &dst)?;
            }
        }
        Ok(Next::Enter)
    }
}

/// A walker's error as an I/O error (its own, when it is one).
pub(crate) fn walk_to_io(e: tasks::walk::WalkError) -> std::io::Error {
    match e {
        tasks::walk::WalkError::Io { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    }
}
