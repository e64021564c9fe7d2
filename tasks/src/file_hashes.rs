//! One content hash per file per task load. The lock's package digest (`digest.rs`) and Harbor
//! 0.26's `task_checksum` (`checksum.rs`) follow different protocols over overlapping files,
//! but both hash each file's contents with sha256; [`FileHashes`] lets a load read each file
//! once, streamed, so a large data file costs one read and a buffer rather than two reads and
//! its whole size in memory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::TaskError;

/// How much of a file is hashed at a time.
const CHUNK: usize = 64 * 1024;

/// The sha256 of files' contents, each read the first time it is asked for (keyed by the
/// file's canonical path, so a file reached through two spellings or a link is read once).
/// One per task load: a file changed afterwards is not seen.
#[derive(Debug, Default)]
pub struct FileHashes {
    known: RefCell<HashMap<PathBuf, String>>,
}

impl FileHashes {
    /// The lowercase sha256 hex of the contents of the file at `path`.
    pub fn sha256_hex(&self, path: &Path) -> Result<String, TaskError> {
        let real = path.canonicalize().map_err(|e| TaskError::io(path, e))?;
        if let Some(hash) = self.known.borrow().get(&real) {
            return Ok(hash.clone());
        }
        let mut file = std::fs::File::open(&real).map_err(|e| TaskError::io(path, e))?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; CHUNK];
        loop {
            match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => hasher.update(&buffer[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TaskError::io(path, e)),
            }
        }
        let hash = hex::encode(hasher.finalize());
        self.known.borrow_mut().insert(real, hash.clone());
        Ok(hash)
    }

    /// How many distinct files were read.
    pub fn files_read(&self) -> usize {
        self.known.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_once_and_hashed_as_a_whole_read_hashes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.bin");
        // Larger than one chunk and not a multiple of it.
        let bytes: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let hashes = FileHashes::default();
        let first = hashes.sha256_hex(&path).unwrap();
        assert_eq!(first, crate::digest::sha256_hex(&bytes));
        // Changed on disk: the load's hash stands, because the file is not read again, also
        // when reached through another spelling.
        std::fs::write(&path, b"changed").unwrap();
        let again = dir.path().join(".").join("data.bin");
        assert_eq!(hashes.sha256_hex(&again).unwrap(), first);
        assert_eq!(hashes.files_read(), 1);
        // A new load reads it anew.
        assert_eq!(
            FileHashes::default().sha256_hex(&path).unwrap(),
            crate::digest::sha256_hex(b"changed")
        );
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.txt");
        let err = FileHashes::default().sha256_hex(&path).unwrap_err();
        assert!(err.to_string().contains("gone.txt"), "{err}");
    }
}
