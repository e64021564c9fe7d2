//! The content digest a cache entry is checked against on every use: every file's bytes and
//! executable bit, every symlink's target and every directory, by relative path, so an edit,
//! a truncated, added, removed or renamed file all change it. (Wider than the task digest
//! lock.json records, which leaves out what `.harborignore` excludes: the cache must notice
//! any change, not only the ones that change the task.)

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// `sha256:<hex>` of the tree at `root`.
pub fn tree_digest(root: &Path) -> std::io::Result<String> {
    let mut outer = Sha256::new();
    walk(root, "", &mut outer)?;
    Ok(format!("sha256:{}", hex::encode(outer.finalize())))
}

fn walk(dir: &Path, prefix: &str, outer: &mut Sha256) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        let meta = std::fs::symlink_metadata(entry.path())?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            outer.update(format!("L {rel}\0{}\n", target.display()).as_bytes());
        } else if meta.is_dir() {
            outer.update(format!("D {rel}\n").as_bytes());
            walk(&entry.path(), &format!("{rel}/"), outer)?;
        } else {
            let mut inner = Sha256::new();
            let mut file = std::fs::File::open(entry.path())?;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                inner.update(&buf[..n]);
            }
            let exec = meta.permissions().mode() & 0o111 != 0;
            outer
                .update(format!("F {rel}\0{}\0{exec}\n", hex::encode(inner.finalize())).as_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_change_to_the_tree_changes_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/test.sh"), "exit 0\n").unwrap();
        let first = tree_digest(dir.path()).unwrap();
        assert_eq!(first, tree_digest(dir.path()).unwrap());
        std::fs::write(dir.path().join("tests/test.sh"), "exit 0").unwrap();
        let truncated = tree_digest(dir.path()).unwrap();
        assert_ne!(first, truncated);
        std::fs::set_permissions(
            dir.path().join("tests/test.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_ne!(truncated, tree_digest(dir.path()).unwrap());
    }
}
