//! The deterministic tar writer: sorted entries, fixed mtime, uid/gid 0, exec bit only, symlinks
//! stored. Its sha256 is over the uncompressed bytes, because gzip output varies by backend.
//! Agent sources, image build contexts and uploads are all written by [`write_entries`].

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use flate2::Compression;
use flate2::GzBuilder;
use sha2::{Digest, Sha256};
use tar::{EntryType, Header, HeaderMode};

use crate::error::{ArchiveError, ProvenanceError};
use crate::walk::{EntryKind, SourceEntry, SourceTree};

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

/// How many entries of each kind a written archive holds, and the bytes of its files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveCounts {
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
    let mut tar = Vec::new();
    let counts = write_entries(&tree.entries, "", &mut tar)?;
    let sha256 = hex::encode(Sha256::digest(&tar));
    Ok(SourceArchive {
        tar,
        sha256,
        file_count: counts.file_count,
        dir_count: counts.dir_count,
        symlink_count: counts.symlink_count,
        total_bytes: counts.total_bytes,
    })
}

/// Writes `entries` (already sorted) as a deterministic tar to `out`, each named
/// `prefix/rel_path` (just `rel_path` when `prefix` is empty), and finishes the archive.
///
/// Every header is normalised so the bytes depend only on names, contents, the owner exec bit
/// and symlink targets: mtime 1153704088, uid/gid 0, mode 0755 for directories and files with
/// the owner exec bit, 0644 for other files, 0777 for symlinks. Files are streamed, never held
/// whole in memory; each is opened without following symlinks and stored with the size it had
/// when opened (a file that shrinks meanwhile is an error, one that grows is cut at that size),
/// so a header never disagrees with its data.
pub(crate) fn write_entries(
    entries: &[SourceEntry],
    prefix: &str,
    out: impl Write,
) -> Result<ArchiveCounts, ArchiveError> {
    let mut builder = tar::Builder::new(out);
    builder.mode(HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    let mut counts = ArchiveCounts::default();
    for entry in entries {
        let name = if prefix.is_empty() {
            entry.rel_path.clone()
        } else {
            format!("{prefix}/{}", entry.rel_path)
        };
        match &entry.kind {
            EntryKind::Dir => {
                counts.dir_count += 1;
                let mut header = own_header(&entry.abs_path, EntryType::Directory)?;
                builder
                    .append_data(&mut header, format!("{name}/"), std::io::empty())
                    .map_err(ArchiveError::Write)?;
            }
            EntryKind::File { .. } => {
                counts.file_count += 1;
                let (file, meta) = open_regular(&entry.abs_path)?;
                counts.total_bytes += meta.len();
                let mut header = header(&meta, EntryType::Regular, meta.len());
                let data = ExactLen {
                    file,
                    remaining: meta.len(),
                };
                builder
                    .append_data(&mut header, &name, data)
                    .map_err(|e| ArchiveError::io(&entry.abs_path, e))?;
            }
            EntryKind::Symlink { target } => {
                counts.symlink_count += 1;
                let mut header = own_header(&entry.abs_path, EntryType::Symlink)?;
                // Fixed mode: a symlink's own mode varies by platform and means nothing.
                header.set_mode(0o777);
                builder
                    .append_link(&mut header, &name, target)
                    .map_err(ArchiveError::Write)?;
            }
        }
    }
    builder.finish().map_err(ArchiveError::Write)?;
    Ok(counts)
}

/// A GNU header for an entry of `entry_type` and `size` with `meta` in deterministic mode:
/// mtime 1153704088, uid/gid 0, mode 0755 (directories, owner-executable files) or 0644.
fn header(meta: &std::fs::Metadata, entry_type: EntryType, size: u64) -> Header {
    let mut header = Header::new_gnu();
    header.set_metadata_in_mode(meta, HeaderMode::Deterministic);
    header.set_entry_type(entry_type);
    header.set_size(size);
    header
}

/// The header of the directory or symlink at `path` itself (never what a link points to).
fn own_header(path: &Path, entry_type: EntryType) -> Result<Header, ArchiveError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| ArchiveError::io(path, e))?;
    Ok(header(&meta, entry_type, 0))
}

/// Opens `path` for reading without following a symlink put there since the walk, and checks
/// it is still a regular file.
fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), ArchiveError> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| ArchiveError::io(path, e))?;
    let meta = file.metadata().map_err(|e| ArchiveError::io(path, e))?;
    if !meta.is_file() {
        return Err(ArchiveError::UnsupportedEntry {
            path: path.to_path_buf(),
        });
    }
    Ok((file, meta))
}

/// Reads exactly `remaining` bytes of `file`: stops there even if the file grew, and fails if it
/// ends sooner, because the tar header already promised that many.
struct ExactLen {
    file: File,
    remaining: u64,
}

impl Read for ExactLen {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.remaining == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let got = self.file.read(&mut buf[..want])?;
        if got == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file shrank while it was being archived",
            ));
        }
        self.remaining -= got as u64;
        Ok(got)
    }
}

/// Gzips `tar` for transport with a zero mtime and no file name in the header.
pub fn gzip(tar: &[u8]) -> Result<Vec<u8>, ProvenanceError> {
    let mut encoder = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::default());
    encoder.write_all(tar).map_err(ProvenanceError::Archive)?;
    encoder.finish().map_err(ProvenanceError::Archive)
}
