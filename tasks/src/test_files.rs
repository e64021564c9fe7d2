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
