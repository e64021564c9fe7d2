//! The deterministic upload tar: sorted entries, fixed mtime, uid/gid 0, exec bit only, symlinks
//! stored. Its sha256 is over the uncompressed bytes, because gzip output varies by backend.

use std::io::Write;

use flate2::Compression;
use flate2::GzBuilder;
use sha2::{Digest, Sha256};
use tar::{EntryType, Header, HeaderMode};

use crate::error::ProvenanceError;
use crate::walk::{EntryKind, SourceTree};

/// The built archive and what it holds.
#[derive(Debug, Clone)]
pub struct SourceArchive {
    /// The uncompressed tar bytes.
    pub tar: Vec<u8>,
    /// Lowercase hex sha256 of `tar`.
    pub sha256: String,
    /// Regular files stored.
    pub file_count: u64,
    /// Directories stored.
    pub dir_count: u64,
    /// Symlinks stored.
    pub symlink_count: u64,
    /// Sum of regular file sizes.
    pub total_bytes: u64,
}

/// Builds the tar of `tree` in its (sorted) order.
pub fn build_tar(tree: &SourceTree) -> Result<SourceArchive, ProvenanceError> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    let (mut file_count, mut dir_count, mut symlink_count, mut total_bytes) = (0, 0, 0, 0);
    for entry in &tree.entries {
        let meta = std::fs::symlink_metadata(&entry.abs_path)
            .map_err(|e| ProvenanceError::io(&entry.abs_path, e))?;
        let mut header = Header::new_gnu();
        // Deterministic mode: mtime 1153704088, uid/gid 0, mode 0755 (dirs, exec files) or 0644.
        header.set_metadata_in_mode(&meta, HeaderMode::Deterministic);
        match &entry.kind {
            EntryKind::Dir => {
                dir_count += 1;
                header.set_entry_type(EntryType::Directory);
                header.set_size(0);
                builder
                    .append_data(
                        &mut header,
                        format!("{}/", entry.rel_path),
                        std::io::empty(),
                    )
                    .map_err(ProvenanceError::Archive)?;
            }
            EntryKind::File { .. } => {
                file_count += 1;
                // Read the bytes once so the size in the header and the content agree even if
                // the file changes while we read.
                let bytes = std::fs::read(&entry.abs_path)
                    .map_err(|e| ProvenanceError::io(&entry.abs_path, e))?;
                total_bytes += bytes.len() as u64;
                header.set_entry_type(EntryType::Regular);
                header.set_size(bytes.len() as u64);
                builder
                    .append_data(&mut header, &entry.rel_path, bytes.as_slice())
                    .map_err(ProvenanceError::Archive)?;
            }
            EntryKind::Symlink { target } => {
                symlink_count += 1;
                header.set_entry_type(EntryType::Symlink);
                header.set_size(0);
                // Fixed mode: a symlink's own mode varies by platform and means nothing.
                header.set_mode(0o777);
                builder
                    .append_link(&mut header, &entry.rel_path, target)
                    .map_err(ProvenanceError::Archive)?;
            }
        }
    }
    let tar = builder.into_inner().map_err(ProvenanceError::Archive)?;
    let sha256 = hex::encode(Sha256::digest(&tar));
    Ok(SourceArchive {
        tar,
        sha256,
        file_count,
        dir_count,
        symlink_count,
        total_bytes,
    })
}

/// Gzips `tar` for transport with a zero mtime and no file name in the header.
pub fn gzip(tar: &[u8]) -> Result<Vec<u8>, ProvenanceError> {
    let mut encoder = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::default());
    encoder.write_all(tar).map_err(ProvenanceError::Archive)?;
    encoder.finish().map_err(ProvenanceError::Archive)
}
