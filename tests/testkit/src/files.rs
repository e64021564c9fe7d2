//! Host file-tree helpers for tests: writing, copying and snapshotting directory trees.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Writes `text` to `root/rel`, creating the parent directories.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a file has a parent")).unwrap();
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Writes every `(rel, text)` of `files` under `root` with [`write`], in order.
pub fn write_all(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        write(root, rel, text);
    }
}

/// Copies the directory tree `from` to `to` (created if missing): directories and the contents
/// of files (a symlink is copied as the file it points to).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every entry below `root`, by path relative to it: a file's bytes, a symlink's target, or
/// `<dir>` for a directory. Two trees with equal snapshots hold the same names, contents and
/// links; symlinks are never followed.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(rel, b"<dir>".to_vec());
                walk(root, &path, out);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, target.into_os_string().into_encoded_bytes());
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Sets the modification time of `path` itself (a symlink's own, not its target's) to `date`,
/// anything `touch -d` accepts (`@12345`, `2001-02-03 04:05:06`).
pub fn set_mtime(path: &Path, date: &str) {
    let status = std::process::Command::new("touch")
        .args(["-h", "-d", date])
        .arg(path)
        .status()
        .expect("touch runs");
    assert!(status.success(), "touch -d {date} {}", path.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_snapshots_trees() {
        let from = tempfile::tempdir().unwrap();
        write(from.path(), "a/b.txt", "b");
        std::os::unix::fs::symlink("b.txt", from.path().join("a/link")).unwrap();
        let to = tempfile::tempdir().unwrap();
        copy_dir(from.path(), to.path());
        let snap = snapshot(to.path());
        assert_eq!(snap[Path::new("a")], b"<dir>");
        assert_eq!(snap[Path::new("a/b.txt")], b"b");
        assert_eq!(
            snap[Path::new("a/link")],
            b"b",
            "copied as its target's file"
        );
        assert_eq!(snapshot(from.path())[Path::new("a/link")], b"b.txt");
        set_mtime(&to.path().join("a/b.txt"), "@12345");
        let mtime = std::fs::metadata(to.path().join("a/b.txt"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            mtime,
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(12345)
        );
    }
}
