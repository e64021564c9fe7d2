//! Reading a verifier output file on the host without following links or blocking on FIFOs.
//!
//! The download may have materialized whatever the tests left behind: a symlink to a host
//! secret, a FIFO (opening one blocks forever) or a huge file. So the entry is examined with
//! `symlink_metadata` first, opened with `O_NOFOLLOW | O_NONBLOCK` so a swap between the check
//! and the open cannot redirect or hang us, checked again on the open descriptor, and read
//! only up to the limit.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::Refusal;

/// Why a file could not be read.
#[derive(Debug)]
pub enum ReadFailure {
    /// The file is there but refused; it was not read.
    Refused(Refusal),
    /// The file exists but reading it failed.
    Io(io::Error),
}

/// Reads `path` if it is a regular file of at most `limit` bytes; `Ok(None)` when it is absent.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, ReadFailure> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ReadFailure::Io(e)),
    };
    check_metadata(&meta, limit).map_err(ReadFailure::Refused)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // O_NOFOLLOW fails with ELOOP when the entry became a symlink after the check.
            Some(libc::ELOOP) => ReadFailure::Refused(Refusal::Symlink),
            _ => ReadFailure::Io(e),
        })?;
    let meta = file.metadata().map_err(ReadFailure::Io)?;
    check_metadata(&meta, limit).map_err(ReadFailure::Refused)?;
    read_at_most(file, limit).map(Some)
}

/// Refuses anything but a regular file within `limit` bytes.
pub fn check_metadata(meta: &Metadata, limit: u64) -> Result<(), Refusal> {
    let file_type = meta.file_type();
    if file_type.is_symlink() {
        return Err(Refusal::Symlink);
    }
    if !file_type.is_file() {
        let kind = if file_type.is_fifo() {
            "fifo"
        } else if file_type.is_socket() {
            "socket"
        } else if file_type.is_dir() {
            "directory"
        } else if file_type.is_block_device() || file_type.is_char_device() {
            "device"
        } else {
            "special file"
        };
        return Err(Refusal::NotRegular {
            kind: kind.to_owned(),
        });
    }
    if meta.len() > limit {
        return Err(Refusal::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    Ok(())
}

// The size was checked, but the file may still grow (a left-over process can append), so the
// read itself is bounded too.
fn read_at_most(file: File, limit: u64) -> Result<Vec<u8>, ReadFailure> {
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadFailure::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadFailure::Refused(Refusal::TooLarge {
            size: bytes.len() as u64,
            limit,
        }));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::time::Duration;

    fn mkfifo(path: &Path) {
        let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: c_path is a valid NUL-terminated path that outlives the call.
        let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) };
        assert_eq!(
            rc,
            0,
            "mkfifo {}: {}",
            path.display(),
            io::Error::last_os_error()
        );
    }

    #[test]
    fn reads_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reward.txt");
        std::fs::write(&path, "1\n").unwrap();
        assert_eq!(read_regular_file(&path, 64).unwrap(), Some(b"1\n".to_vec()));
    }

    #[test]
    fn absent_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            read_regular_file(&dir.path().join("reward.txt"), 64).unwrap(),
            None
        );
    }

    #[test]
    fn symlink_is_refused_even_when_its_target_is_valid() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("secret");
        std::fs::write(&target, "1").unwrap();
        let link = dir.path().join("reward.txt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        match read_regular_file(&link, 64) {
            Err(ReadFailure::Refused(Refusal::Symlink)) => {}
            other => panic!("expected a symlink refusal, got {other:?}"),
        }
    }

    #[test]
    fn dangling_symlink_is_refused_not_absent() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("reward.txt");
        std::os::unix::fs::symlink("/nonexistent/target", &link).unwrap();
        assert!(matches!(
            read_regular_file(&link, 64),
            Err(ReadFailure::Refused(Refusal::Symlink))
        ));
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reward.txt");
        mkfifo(&path);
        // Run on a thread so a regression (opening the FIFO) fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let thread_path = path.clone();
        std::thread::spawn(move || {
            let outcome = read_regular_file(&thread_path, 64);
            tx.send(matches!(outcome, Err(ReadFailure::Refused(Refusal::NotRegular { ref kind })) if kind == "fifo"))
                .ok();
        });
        let refused = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("reading a FIFO must not block");
        assert!(refused, "a FIFO must be refused as a non-regular file");
    }

    #[test]
    fn oversized_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reward.txt");
        std::fs::write(&path, vec![b'1'; 65]).unwrap();
        match read_regular_file(&path, 64) {
            Err(ReadFailure::Refused(Refusal::TooLarge {
                size: 65,
                limit: 64,
            })) => {}
            other => panic!("expected a size refusal, got {other:?}"),
        }
        // Exactly at the limit is fine.
        std::fs::write(&path, vec![b'1'; 64]).unwrap();
        assert_eq!(read_regular_file(&path, 64).unwrap().unwrap().len(), 64);
    }

    #[test]
    fn directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reward.txt");
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(
            read_regular_file(&path, 64),
            Err(ReadFailure::Refused(Refusal::NotRegular { ref kind })) if kind == "directory"
        ));
    }
}
