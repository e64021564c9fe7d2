//! Task trees written to disk for the crate's unit tests.

use std::path::Path;

/// Writes `files`, `(path, contents)` relative to `root`, creating parent directories; a path
/// ending in `/` is an empty directory.
pub(crate) fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (path, contents) in files {
        let full = root.join(path);
        if path.ends_with('/') {
            std::fs::create_dir_all(&full).unwrap();
        } else {
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, contents).unwrap();
        }
    }
}

/// A fresh temporary directory holding `files` (see [`write_files`]).
pub(crate) fn task_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    dir
}

/// `.harborignore` rules at every depth, in scope and out of it, with a file each keeps or
/// excludes (as named): written over a task, Harbor 0.26 computed its `task_checksum`
/// (`checksum.rs`' tests) and says which paths it excludes (`file_filter_tests.rs`).
pub(crate) const HARBORIGNORE_CASE: &[(&str, &str)] = &[
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
];
