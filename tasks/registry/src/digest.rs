//! The content digest a cache entry is checked against on every use: every file's bytes and
//! executable bit, every symlink's target and every directory, by relative path, so an edit,
//! a truncated, added, removed or renamed file all change it. (Wider than the task digest
//! lock.json records, which leaves out what `.harborignore` excludes: the cache must notice
//! any change, not only the ones that change the task.)

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};
use tasks::walk::{Entry, Kind, Links, Next, TreeWalk, Visitor};

/// `sha256:<hex>` of the tree at `root`.
pub fn tree_digest(root: &Path) -> std::io::Result<String> {
    let mut outer = Outer(Sha256::new());
    // `Keep`: a link is hashed as its target text, never followed, as the copy keeps it.
    TreeWalk::new(root, Links::Keep)
        .walk(&mut outer)
        .map_err(|stop| stop.into_error(crate::copy::walk_to_io))?;
    Ok(format!("sha256:{}", hex::encode(outer.0.finalize())))
}

/// The digest being computed, fed each entry in walk order (names in byte order, a directory
/// before its contents).
struct Outer(Sha256);

impl Visitor for Outer {
    type Error = std::io::Error;

    fn visit(&mut self, entry: &Entry) -> std::io::Result<Next> {
        let rel = &entry.rel;
        match entry.kind {
            Kind::Link(_) => {
                let target = std::fs::read_link(&entry.path)?;
                self.0
                    .update(format!("L {rel}\0{}\n", target.display()).as_bytes());
            }
            Kind::Dir => self.0.update(format!("D {rel}\n").as_bytes()),
            _ => {
                let mut inner = Sha256::new();
                let mut file = std::fs::File::open(&entry.path)?;
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    let n = file.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    inner.update(&buf[..n]);
                }
                let meta = std::fs::symlink_metadata(&entry.path)?;
                let exec = meta.permissions().mode() & 0o111 != 0;
                self.0.update(
                    format!("F {rel}\0{}\0{exec}\n", hex::encode(inner.finalize())).as_bytes(),
                );
            }
        }
        Ok(Next::Enter)
    }
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

    /// Computed by an independent Python implementation of the format over the same tree: a
    /// cache entry recorded before keeps its digest.
    #[test]
    fn the_digest_of_a_known_tree_is_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, text) in [
            ("a/x", "x"),
            ("a-b", "ab"),
            ("B", "B"),
            ("tests/test.sh", "#!/bin/sh\nexit 0\n"),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        std::fs::set_permissions(
            root.join("tests/test.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("../a/x", root.join("tests/link")).unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        assert_eq!(
            tree_digest(root).unwrap(),
            "sha256:f779d867bcb7c5a73286e386d3413a423f20a8d3df275ea1f397d589ffba75da"
        );
    }
}
