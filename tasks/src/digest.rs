//! Content digests exactly as Harbor 0.26's packager computes them (`Packager.collect_files`,
//! docs/harbor-format.md §1.6).
//!
//! Task digest: for each hashed file in codepoint order of its relative POSIX path,
//! `outer.update("{rel}\0{sha256_hex(bytes)}\n")`; the digest is `sha256:{outer}`. The hashed
//! files are `task.toml`, `instruction.md`, `README.md` and the task's reference
//! `trajectory.json` when present, and the files under `environment/`, `tests/`, `solution/`
//! and `steps/`, less what `.harborignore` excludes ([`crate::file_filter`]) and what the
//! task's `.gitignore` (else the default patterns) ignores. A link to a file is hashed as its
//! target's bytes; a link to a directory is not descended into, as Python's `rglob` and 0.26's
//! `select_files` do not; a link out of the task is refused ([`crate::walk`]). (Harbor 0.13.1
//! hashed neither `trajectory.json` nor applied `.harborignore`: a task with neither, as every
//! Terminal-Bench 2.0 task, has the same digest under both.)

use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use sha2::{Digest, Sha256};

use crate::error::TaskError;
use crate::file_filter::TaskFileFilter;
use crate::file_hashes::FileHashes;
use crate::walk::{Entry, Links, Next, Stopped, TreeWalk, Visitor};

/// Top-level files that are hashed when present (0.24 added the reference trajectory).
const TOP_FILES: [&str; 4] = [
    "task.toml",
    "instruction.md",
    "README.md",
    "trajectory.json",
];
/// Directories whose whole contents are hashed.
const HASHED_DIRS: [&str; 4] = ["environment", "tests", "solution", "steps"];
/// Ignore rules used when the task has no `.gitignore`.
const DEFAULT_IGNORES: [&str; 6] = ["__pycache__/", "*.pyc", ".DS_Store", "*.swp", "*.swo", "*~"];

/// The sha256 hex of a byte string.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The files that go into a task's digest, as sorted relative POSIX paths with absolute paths.
pub fn hashed_files(task_dir: &Path) -> Result<Vec<(String, PathBuf)>, TaskError> {
    let ignore = ignore_rules(task_dir)?;
    let mut files = Vec::new();
    for name in TOP_FILES {
        let path = task_dir.join(name);
        if path.is_file() && !ignore.matched(&path, false).is_ignore() {
            files.push((name.to_owned(), path));
        }
    }
    let filter = TaskFileFilter::new(task_dir)?;
    let mut hashed = Hashed {
        task_dir,
        ignore: &ignore,
        filter: &filter,
        files,
    };
    for dir in HASHED_DIRS {
        let root = task_dir.join(dir);
        if root.is_dir() {
            // `ToFiles`: a link to a file counts as the file, a link to a directory is not
            // entered, as Harbor's packager (`rglob`) does; a link out of the task is refused.
            TreeWalk::new(&root, Links::ToFiles)
                .confined_to(task_dir)
                .walk(&mut hashed)
                .map_err(Stopped::into_inner)?;
        }
    }
    let mut files = hashed.files;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

fn ignore_rules(task_dir: &Path) -> Result<Gitignore, TaskError> {
    let mut builder = GitignoreBuilder::new(task_dir);
    let gitignore = task_dir.join(".gitignore");
    if gitignore.is_file() {
        if let Some(err) = builder.add(&gitignore) {
            return Err(TaskError::invalid(&gitignore, "(pattern)", err.to_string()));
        }
    } else {
        for pattern in DEFAULT_IGNORES {
            builder
                .add_line(None, pattern)
                .map_err(|e| TaskError::invalid(task_dir, "(default ignore)", e.to_string()))?;
        }
    }
    builder
        .build()
        .map_err(|e| TaskError::invalid(&gitignore, "(pattern)", e.to_string()))
}

/// `path` relative to `root` as a `/`-separated string ("" for `root` itself; `path` as it is
/// when it does not lie under `root`): how both task digests name a file.
pub(crate) fn posix_relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// One task's hashed files, with what it leaves out.
struct Hashed<'a> {
    task_dir: &'a Path,
    ignore: &'a Gitignore,
    filter: &'a TaskFileFilter,
    files: Vec<(String, PathBuf)>,
}

impl Visitor for Hashed<'_> {
    type Error = TaskError;

    fn visit(&mut self, entry: &Entry) -> Result<Next, TaskError> {
        let path = &entry.path;
        let is_dir = entry.is_dir();
        if self.ignore.matched(path, is_dir).is_ignore() || self.filter.is_excluded(path)? {
            return Ok(Next::Pass);
        }
        if entry.is_file() {
            self.files
                .push((posix_relative(self.task_dir, path), path.clone()));
        }
        Ok(Next::Enter)
    }
}

/// The task content digest, `sha256:<hex>`.
pub fn task_digest(task_dir: &Path) -> Result<String, TaskError> {
    task_digest_with(task_dir, &FileHashes::default())
}

/// [`task_digest`] with the file hashes of the load it is part of (see [`FileHashes`]).
pub fn task_digest_with(task_dir: &Path, hashes: &FileHashes) -> Result<String, TaskError> {
    let mut outer = Sha256::new();
    for (rel, path) in hashed_files(task_dir)? {
        outer.update(format!("{rel}\0{}\n", hashes.sha256_hex(&path)?).as_bytes());
    }
    Ok(format!("sha256:{}", hex::encode(outer.finalize())))
}

/// The dataset digest from task digests and extra dataset files (`path`, file sha256 hex).
pub fn dataset_digest(task_digests: &[String], files: &[(String, String)]) -> String {
    let mut tasks: Vec<&str> = task_digests
        .iter()
        .map(|d| d.trim_start_matches("sha256:"))
        .collect();
    tasks.sort_unstable();
    let mut text = tasks.join(",");
    if !files.is_empty() {
        let mut entries: Vec<String> = files
            .iter()
            .map(|(p, d)| format!("{p}:{}", d.trim_start_matches("sha256:")))
            .collect();
        entries.sort();
        text.push(';');
        text.push_str(&entries.join(","));
    }
    format!("sha256:{}", sha256_hex(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_files::{task_dir, write_files};
    use std::process::Command;

    /// The digest computed by a shell pipeline of sha256sum over an explicit, sorted file list.
    fn shell_digest(root: &Path, files: &[&str]) -> String {
        let mut sorted = files.to_vec();
        sorted.sort();
        let script = sorted
            .iter()
            .map(|f| format!("printf '%s\\0%s\\n' '{f}' \"$(sha256sum '{f}' | cut -d' ' -f1)\""))
            .collect::<Vec<_>>()
            .join("; ");
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("({script}) | sha256sum | cut -d' ' -f1"))
            .current_dir(root)
            .output()
            .unwrap();
        format!("sha256:{}", String::from_utf8(out.stdout).unwrap().trim())
    }

    /// The fixture task with `extra` files written over it.
    fn fixture_with(extra: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = fixture();
        write_files(dir.path(), extra);
        dir
    }

    fn fixture() -> tempfile::TempDir {
        task_dir(&[
            ("task.toml", "[verifier]\ntimeout_sec = 10.0\n"),
            ("instruction.md", "Do it.\n"),
            ("README.md", "readme\n"),
            ("environment/Dockerfile", "FROM scratch\n"),
            ("environment/files/nested/deep.txt", "deep\n"),
            ("tests/test.sh", "#!/bin/bash\n"),
            ("tests/test_outputs.py", "def test(): pass\n"),
            ("solution/solve.sh", "echo hi\n"),
            ("notes.txt", "not hashed: outside the hashed dirs\n"),
        ])
    }

    /// Asserts that the task digest of `root` hashes exactly `files`.
    fn assert_digest_hashes(root: &Path, files: &[&str]) {
        assert_eq!(task_digest(root).unwrap(), shell_digest(root, files));
    }

    #[test]
    fn default_ignores_apply_without_gitignore() {
        let dir = fixture_with(&[
            ("tests/__pycache__/x.cpython-311.pyc", "bytes"),
            ("solution/editor.swp", "swap"),
            ("environment/file.txt~", "backup"),
        ]);
        assert_digest_hashes(
            dir.path(),
            &[
                "README.md",
                "environment/Dockerfile",
                "environment/files/nested/deep.txt",
                "instruction.md",
                "solution/solve.sh",
                "task.toml",
                "tests/test.sh",
                "tests/test_outputs.py",
            ],
        );
    }

    #[test]
    fn gitignore_replaces_default_ignores() {
        let dir = fixture_with(&[
            (".gitignore", "*.log\nenvironment/files/\n"),
            ("tests/run.log", "ignored by .gitignore"),
            (
                "tests/cache.pyc",
                "hashed: .gitignore replaces the defaults",
            ),
        ]);
        assert_digest_hashes(
            dir.path(),
            &[
                "README.md",
                "environment/Dockerfile",
                "instruction.md",
                "solution/solve.sh",
                "task.toml",
                "tests/cache.pyc",
                "tests/test.sh",
                "tests/test_outputs.py",
            ],
        );
    }

    /// The fixture with what Harbor 0.26's packager treats apart: the reference trajectory,
    /// `.harborignore` rules (in scope and out of it), a link to a file and one to a directory.
    fn fixture_026() -> tempfile::TempDir {
        let dir = fixture_with(&[
            ("trajectory.json", "{}\n"),
            ("tests/.harborignore", "*.log\n"),
            ("tests/run.log", "excluded by tests/.harborignore"),
            ("environment/.harborignore", "x\n"),
            (
                "environment/x",
                "kept: rules outside tests/ and solution/ exclude nothing",
            ),
        ]);
        std::os::unix::fs::symlink("files", dir.path().join("environment/linked")).unwrap();
        std::os::unix::fs::symlink("test.sh", dir.path().join("tests/alias.sh")).unwrap();
        dir
    }

    // Computed by Harbor 0.26.0's own `Packager.compute_content_hash` over `fixture_026()`.
    const HARBOR_026_DIGEST: &str =
        "sha256:828413ca145b765a827d2b4c8fc873cd9bff36377636190f58d7ccadf3928a96";

    #[test]
    fn the_026_packagers_inputs_are_hashed_as_it_hashes_them() {
        let dir = fixture_026();
        assert_digest_hashes(
            dir.path(),
            &[
                "README.md",
                "environment/Dockerfile",
                "environment/files/nested/deep.txt",
                "environment/x",
                "instruction.md",
                "solution/solve.sh",
                "task.toml",
                "tests/alias.sh",
                "tests/test.sh",
                "tests/test_outputs.py",
                "trajectory.json",
            ],
        );
        assert_eq!(task_digest(dir.path()).unwrap(), HARBOR_026_DIGEST);
    }

    #[test]
    fn digest_changes_with_content_and_not_with_unhashed_files() {
        let dir = fixture();
        let root = dir.path();
        let before = task_digest(root).unwrap();
        write_files(root, &[("notes.txt", "changed")]);
        assert_eq!(task_digest(root).unwrap(), before);
        write_files(root, &[("tests/test.sh", "#!/bin/bash\nexit 1\n")]);
        assert_ne!(task_digest(root).unwrap(), before);
    }

    #[test]
    fn dataset_digest_sorts_tasks_and_files() {
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        let expected = sha256_hex(format!("{},{}", "a".repeat(64), "b".repeat(64)).as_bytes());
        assert_eq!(
            dataset_digest(&[b.clone(), a.clone()], &[]),
            format!("sha256:{expected}")
        );
        let with_files = dataset_digest(&[a, b], &[("metric.py".into(), "c".repeat(64))]);
        let expected = sha256_hex(
            format!(
                "{},{};metric.py:{}",
                "a".repeat(64),
                "b".repeat(64),
                "c".repeat(64)
            )
            .as_bytes(),
        );
        assert_eq!(with_files, format!("sha256:{expected}"));
    }
}
