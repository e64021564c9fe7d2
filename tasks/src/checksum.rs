//! A task's `task_checksum` exactly as Harbor 0.26 computes it (`Task.checksum`,
//! `harbor/models/task/task.py`): the `dirhash` package's sha256 hash of the whole task
//! directory with its default protocol, leaving out what the task's `.harborignore` files
//! exclude ([`crate::file_filter`]). It is not the package digest lock.json records
//! ([`crate::digest`]): that one hashes only the task's known files and paths, this one every
//! file and directory name.
//!
//! The dirhash protocol: a file's hash is the sha256 of its bytes; a directory's is the sha256
//! of its entries' descriptors, sorted and joined by `\0\0`, where a file's descriptor is
//! `data:<hash>\0name:<name>` and a directory's `dirhash:<hash>\0name:<name>`. Links are
//! followed inside the task directory; a link out of it is refused where Harbor's dirhash would
//! hash the host file it leads to ([`crate::walk`]'s rule). A directory holding no file (at any
//! depth) is left out, as git does.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::TaskError;
use crate::file_filter::TaskFileFilter;
use crate::file_hashes::FileHashes;
use crate::walk::{Entry, Links, Next, TreeWalk, Visitor, WalkError};

/// The task's `task_checksum` (64 hex digits, no prefix, as Harbor records it).
pub fn task_checksum(task_dir: &Path) -> Result<String, TaskError> {
    task_checksum_with(task_dir, &FileHashes::default())
}

/// [`task_checksum`] with the file hashes of the load it is part of (see [`FileHashes`]).
pub fn task_checksum_with(task_dir: &Path, hashes: &FileHashes) -> Result<String, TaskError> {
    let root = task_dir
        .canonicalize()
        .map_err(|e| TaskError::io(task_dir, e))?;
    let mut dirhash = DirHash {
        filter: TaskFileFilter::new(&root)?,
        hashes,
        open: vec![Vec::new()],
    };
    // `Follow`: dirhash follows links, into directories too; one out of the task is refused,
    // and one back to a directory above it is a cycle, which Harbor's dirhash refuses too.
    TreeWalk::new(&root, Links::Follow)
        .walk(&mut dirhash)
        .map_err(|stop| {
            stop.into_error(|e| match e {
                WalkError::Loop { link, .. } => TaskError::invalid(
                    &link,
                    "(task_checksum)",
                    "a symbolic link loops back to a directory above it",
                ),
                other => other.into(),
            })
        })?;
    let top = dirhash.open.pop().unwrap_or_default();
    hash_of(top).ok_or_else(|| {
        TaskError::invalid(
            task_dir,
            "(task_checksum)",
            "the task directory holds no file",
        )
    })
}

/// One hashing walk: the descriptors of each directory open on the current path.
struct DirHash<'a> {
    /// What `.harborignore` leaves out (a `.harborignore` itself included).
    filter: TaskFileFilter,
    hashes: &'a FileHashes,
    /// The descriptors gathered so far, the root's first, the current directory's last.
    open: Vec<Vec<String>>,
}

impl Visitor for DirHash<'_> {
    type Error = TaskError;

    fn visit(&mut self, entry: &Entry) -> Result<Next, TaskError> {
        if self.filter.is_excluded(&entry.path)? {
            return Ok(Next::Pass);
        }
        if entry.is_dir() {
            self.open.push(Vec::new());
        } else if entry.is_file() {
            let hash = self.hashes.sha256_hex(&entry.path)?;
            let name = entry.name.to_string_lossy();
            self.add(format!("data:{hash}\0name:{name}"));
        }
        Ok(Next::Enter)
    }

    fn leave(&mut self, dir: &Entry) -> Result<(), TaskError> {
        let descriptors = self.open.pop().unwrap_or_default();
        // A directory holding no file is left out, as git does.
        if let Some(hash) = hash_of(descriptors) {
            let name = dir.name.to_string_lossy();
            self.add(format!("dirhash:{hash}\0name:{name}"));
        }
        Ok(())
    }
}

impl DirHash<'_> {
    /// Adds a descriptor to the directory being read (the root's frame is never popped, as the
    /// walk leaves only the directories it entered).
    fn add(&mut self, descriptor: String) {
        if let Some(current) = self.open.last_mut() {
            current.push(descriptor);
        }
    }
}

/// The dirhash of a directory's descriptors (`None` when it holds no file).
fn hash_of(mut descriptors: Vec<String>) -> Option<String> {
    if descriptors.is_empty() {
        return None;
    }
    descriptors.sort();
    Some(hex::encode(Sha256::digest(
        descriptors.join("\0\0").as_bytes(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_files::task_dir;

    /// A task tree with nested, empty and hidden entries (values below are Harbor's).
    const FILES: &[(&str, &str)] = &[
        ("task.toml", "[verifier]\ntimeout_sec = 10.0\n"),
        ("instruction.md", "Do it.\n"),
        ("environment/Dockerfile", "FROM scratch\n"),
        ("environment/files/nested/deep.txt", "deep\n"),
        ("tests/test.sh", "#!/bin/bash\n"),
        ("solution/solve.sh", "echo hi\n"),
        (
            "notes.txt",
            "hashed too: the checksum covers the whole directory\n",
        ),
        (".hidden", "hidden files count\n"),
        ("empty/", ""),
        ("environment/empty/", ""),
    ];

    // Computed by Harbor 0.26.0's own code (`harbor.models.task.task.Task(dir).checksum`, with
    // dirhash 0.5.0) over the same tree written by `task_dir(FILES)` (and, for the second, the
    // `.harborignore` additions below); see scripts/harbor-compat/task_checksum.py.
    const HARBOR_CHECKSUM: &str =
        "b84fa72d08bc7b99c5475f33c8d7edb7e70bd36a50e132db47d5f0163be12f93";
    const HARBOR_CHECKSUM_IGNORED: &str =
        "711e884664e4dfd0733e24a8838957ba2ebacba2a0e142821e68ba1774f1de11";

    #[test]
    fn equals_the_checksum_harbor_computes() {
        let dir = task_dir(FILES);
        assert_eq!(task_checksum(dir.path()).unwrap(), HARBOR_CHECKSUM);
    }

    #[test]
    fn harborignore_rules_exclude_as_harbor_excludes() {
        let dir = task_dir(FILES);
        crate::test_files::write_files(dir.path(), crate::test_files::HARBORIGNORE_CASE);
        assert_eq!(task_checksum(dir.path()).unwrap(), HARBOR_CHECKSUM_IGNORED);
    }

    #[test]
    fn a_rule_outside_tests_and_solution_excludes_nothing() {
        let dir = task_dir(FILES);
        let before = task_checksum(dir.path()).unwrap();
        crate::test_files::write_files(dir.path(), &[("environment/.harborignore", "*\n")]);
        assert_eq!(task_checksum(dir.path()).unwrap(), before);
        crate::test_files::write_files(dir.path(), &[("environment/extra.txt", "x")]);
        assert_ne!(task_checksum(dir.path()).unwrap(), before);
    }

    #[test]
    fn links_inside_hash_as_their_targets_and_links_out_or_back_up_are_refused() {
        let linked = task_dir(FILES);
        std::os::unix::fs::symlink("notes.txt", linked.path().join("alias.txt")).unwrap();
        std::os::unix::fs::symlink("environment", linked.path().join("env-link")).unwrap();
        let copied = task_dir(FILES);
        crate::test_files::write_files(
            copied.path(),
            &[
                ("alias.txt", FILES[6].1),
                ("env-link/Dockerfile", "FROM scratch\n"),
                ("env-link/files/nested/deep.txt", "deep\n"),
            ],
        );
        assert_eq!(
            task_checksum(linked.path()).unwrap(),
            task_checksum(copied.path()).unwrap()
        );

        std::os::unix::fs::symlink("/etc/hostname", linked.path().join("out")).unwrap();
        let err = task_checksum(linked.path()).unwrap_err().to_string();
        assert!(
            err.contains("out") && err.contains("outside the task directory"),
            "{err}"
        );
        std::fs::remove_file(linked.path().join("out")).unwrap();
        std::os::unix::fs::symlink("..", linked.path().join("environment/up")).unwrap();
        let err = task_checksum(linked.path()).unwrap_err().to_string();
        assert!(err.contains("/up") && err.contains("loops back"), "{err}");
    }
}
