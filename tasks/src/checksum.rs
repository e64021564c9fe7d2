//! A task's `task_checksum` exactly as Harbor 0.26 computes it (`Task.checksum`,
//! `harbor/models/task/task.py`): the `dirhash` package's sha256 hash of the whole task
//! directory with its default protocol, leaving out what the task's `.harborignore` files
//! exclude. It is not the package digest lock.json records ([`crate::digest`]): that one hashes
//! only the task's known files and paths, this one every file and directory name.
//!
//! The dirhash protocol: a file's hash is the sha256 of its bytes; a directory's is the sha256
//! of its entries' descriptors, sorted and joined by `\0\0`, where a file's descriptor is
//! `data:<hash>\0name:<name>` and a directory's `dirhash:<hash>\0name:<name>`. Links are
//! followed; a directory holding no file (at any depth) is left out, as git does.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use sha2::{Digest, Sha256};

use crate::error::TaskError;
use crate::file_hashes::FileHashes;

/// The file that excludes test and solution inputs (Harbor's `TaskFileFilter.IGNORE_FILENAME`);
/// such files are never hashed themselves.
const IGNORE_FILE: &str = ".harborignore";

/// The task's `task_checksum` (64 hex digits, no prefix, as Harbor records it).
pub fn task_checksum(task_dir: &Path) -> Result<String, TaskError> {
    task_checksum_with(task_dir, &FileHashes::default())
}

/// [`task_checksum`] with the file hashes of the load it is part of (see [`FileHashes`]).
pub fn task_checksum_with(task_dir: &Path, hashes: &FileHashes) -> Result<String, TaskError> {
    let root = task_dir
        .canonicalize()
        .map_err(|e| TaskError::io(task_dir, e))?;
    let mut walk = Walk {
        root: root.clone(),
        on_path: HashSet::new(),
        hashes,
    };
    walk.dir_hash(&root, &[])?.ok_or_else(|| {
        TaskError::invalid(
            task_dir,
            "(task_checksum)",
            "the task directory holds no file",
        )
    })
}

/// One hashing walk: the task root and the real directories on the current path (a link back
/// to one of them is a cycle, which Harbor's dirhash refuses too).
struct Walk<'a> {
    root: PathBuf,
    on_path: HashSet<PathBuf>,
    hashes: &'a FileHashes,
}

impl Walk<'_> {
    /// The dirhash of `dir` (`None` when it holds no file, so its parent leaves it out).
    /// `rules` are the `.harborignore` matchers of the scoped directories above `dir`.
    fn dir_hash(&mut self, dir: &Path, rules: &[Gitignore]) -> Result<Option<String>, TaskError> {
        let real = dir.canonicalize().map_err(|e| TaskError::io(dir, e))?;
        if !self.on_path.insert(real.clone()) {
            return Err(TaskError::invalid(
                dir,
                "(task_checksum)",
                "a symbolic link loops back to a directory above it",
            ));
        }
        let mut rules = rules.to_vec();
        if in_scope(&self.relative(dir), true) {
            rules.push(harborignore(dir)?);
        }
        let mut entries = std::fs::read_dir(dir)
            .map_err(|e| TaskError::io(dir, e))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TaskError::io(dir, e))?;
        entries.sort();
        let mut descriptors = Vec::new();
        for path in entries {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            // Followed through links, as dirhash follows them.
            let is_dir = path.is_dir();
            if self.excluded(&path, is_dir, &rules) {
                continue;
            }
            if is_dir {
                if let Some(hash) = self.dir_hash(&path, &rules)? {
                    descriptors.push(format!("dirhash:{hash}\0name:{name}"));
                }
            } else if path.is_file() {
                let hash = self.hashes.sha256_hex(&path)?;
                descriptors.push(format!("data:{hash}\0name:{name}"));
            }
        }
        self.on_path.remove(&real);
        if descriptors.is_empty() {
            return Ok(None);
        }
        descriptors.sort();
        Ok(Some(hex::encode(Sha256::digest(
            descriptors.join("\0\0").as_bytes(),
        ))))
    }

    /// `path` relative to the task root, `/`-separated ("" for the root).
    fn relative(&self, path: &Path) -> String {
        crate::digest::posix_relative(&self.root, path)
    }

    /// Whether Harbor's `TaskFileFilter.is_excluded` leaves `path` out: a `.harborignore`
    /// itself, or a path inside tests/ or solution/ (a step's too) that the `.harborignore`
    /// rules above it exclude, the deepest matching rule deciding. (A link is judged by its
    /// target too, when that lies in the task.)
    fn excluded(&self, path: &Path, is_dir: bool, rules: &[Gitignore]) -> bool {
        if path.file_name().is_some_and(|n| n == IGNORE_FILE) {
            return true;
        }
        let by_rules = |p: &Path| {
            in_scope(&self.relative(p), is_dir)
                && rules
                    .iter()
                    .rev()
                    .find_map(|rule| {
                        let m = rule.matched(p, is_dir);
                        (!m.is_none()).then(|| m.is_ignore())
                    })
                    .unwrap_or(false)
        };
        if by_rules(path) {
            return true;
        }
        match path.canonicalize() {
            Ok(real) if real != path && real.starts_with(&self.root) => by_rules(&real),
            _ => false,
        }
    }
}

/// Whether the task-relative path `rel` lies where `.harborignore` rules apply: `tests/`,
/// `solution/`, `steps/<step>/tests/` or `steps/<step>/solution/`, or under one of them.
fn in_scope(rel: &str, is_dir: bool) -> bool {
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
fn harborignore(dir: &Path) -> Result<Gitignore, TaskError> {
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
        crate::test_files::write_files(
            dir.path(),
            &[
                ("tests/.harborignore", "*.log\n!keep.log\ncache/\n"),
                ("tests/run.log", "excluded"),
                ("tests/keep.log", "kept by the negation"),
                ("tests/cache/x.bin", "excluded with its directory"),
                ("tests/sub/.harborignore", "keep.log\n"),
                ("tests/sub/keep.log", "excluded by the deeper rule"),
                ("tests/sub/other.txt", "kept"),
                (".harborignore", "*.txt\n"),
                ("solution/.harborignore", "*.md\n"),
                ("solution/notes.md", "excluded"),
            ],
        );
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
    fn scope_is_tests_and_solution_of_the_task_and_its_steps() {
        assert!(in_scope("tests", true));
        assert!(!in_scope("tests", false));
        assert!(in_scope("tests/a/b.txt", false));
        assert!(in_scope("steps/one/solution/x", false));
        assert!(!in_scope("steps/one/environment/x", false));
        assert!(!in_scope("environment/tests/x", false));
    }
}
