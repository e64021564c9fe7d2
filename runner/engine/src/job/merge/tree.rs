//! Trial dirs copied into the merged job, and compared. Copies, never hard links: a link
//! is the same file, so a change made in place to the merged job (an editor writes in place)
//! would change the part too, and the parts' record manifests with them. `std::fs::copy` uses
//! `copy_file_range`, so a file system that can share blocks (btrfs, XFS) makes a reflink.

use std::io::Read;
use std::path::Path;

/// Copies the tree `from` to `to` (which must not exist): directories made, regular files
/// copied, symlinks recreated as they are (never followed). Returns how many files were
/// copied.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<u64> {
    std::fs::create_dir(to)?;
    let mut copied = 0;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copied += copy_tree(&source, &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target)?;
            std::fs::File::open(&target)?.sync_all()?;
            copied += 1;
        }
        // FIFOs, sockets and devices are never written into trial dirs; none is carried.
    }
    tasks::atomic::sync_dir(to)?;
    Ok(copied)
}

/// Whether the trees `a` and `b` hold the same names, kinds and bytes.
pub fn same_tree(a: &Path, b: &Path) -> std::io::Result<bool> {
    let listing = |dir: &Path| -> std::io::Result<Vec<(std::ffi::OsString, std::fs::FileType)>> {
        let mut entries = std::fs::read_dir(dir)?
            .map(|e| e.and_then(|e| Ok((e.file_name(), e.file_type()?))))
            .collect::<std::io::Result<Vec<_>>>()?;
        entries.sort_by(|x, y| x.0.cmp(&y.0));
        Ok(entries)
    };
    let (la, lb) = (listing(a)?, listing(b)?);
    if la.len() != lb.len() {
        return Ok(false);
    }
    for ((na, ka), (nb, kb)) in la.iter().zip(&lb) {
        if na != nb {
            return Ok(false);
        }
        let (pa, pb) = (a.join(na), b.join(nb));
        let same = if ka.is_dir() && kb.is_dir() {
            same_tree(&pa, &pb)?
        } else if ka.is_symlink() && kb.is_symlink() {
            std::fs::read_link(&pa)? == std::fs::read_link(&pb)?
        } else if ka.is_file() && kb.is_file() {
            same_file(&pa, &pb)?
        } else {
            false
        };
        if !same {
            return Ok(false);
        }
    }
    Ok(true)
}

fn same_file(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (ma, mb) = (std::fs::metadata(a)?, std::fs::metadata(b)?);
    if ma.dev() == mb.dev() && ma.ino() == mb.ino() {
        return Ok(true);
    }
    if ma.len() != mb.len() {
        return Ok(false);
    }
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = read_full(&mut fa, &mut ba)?;
        let m = read_full(&mut fb, &mut bb)?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_the_same_tree_shares_no_inode_and_a_changed_byte_is_not() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir_all(a.join("agent")).unwrap();
        std::fs::write(a.join("result.json"), "{\"r\":1}").unwrap();
        std::fs::write(a.join("agent/log.txt"), "hello").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", a.join("agent/link")).unwrap();
        let b = dir.path().join("b");
        assert_eq!(copy_tree(&a, &b).unwrap(), 2);
        assert!(same_tree(&a, &b).unwrap());
        let (ma, mb) = (
            std::fs::metadata(a.join("result.json")).unwrap(),
            std::fs::metadata(b.join("result.json")).unwrap(),
        );
        assert_ne!(ma.ino(), mb.ino());
        assert_eq!((ma.nlink(), mb.nlink()), (1, 1));
        // Written in place in the copy: the original is untouched.
        std::fs::write(b.join("agent/log.txt"), "edited").unwrap();
        assert_eq!(
            std::fs::read_to_string(a.join("agent/log.txt")).unwrap(),
            "hello"
        );
        std::fs::write(b.join("agent/log.txt"), "hello").unwrap();
        assert_eq!(
            std::fs::read_link(b.join("agent/link")).unwrap(),
            Path::new("/etc/passwd")
        );
        let c = dir.path().join("c");
        copy_tree(&a, &c).unwrap();
        std::fs::write(c.join("tmp"), "{\"r\":0}").unwrap();
        std::fs::rename(c.join("tmp"), c.join("result.json")).unwrap();
        assert!(!same_tree(&a, &c).unwrap());
        assert_eq!(
            std::fs::read_to_string(a.join("result.json")).unwrap(),
            "{\"r\":1}"
        );
        std::fs::write(c.join("result.json"), "{\"r\":1}").unwrap();
        assert!(same_tree(&a, &c).unwrap());
        std::fs::write(c.join("extra"), "").unwrap();
        assert!(!same_tree(&a, &c).unwrap());
    }
}
