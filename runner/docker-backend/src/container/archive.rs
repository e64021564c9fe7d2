//! Moving files in and out of containers as tar streams.

use std::io::{Read, Write};
use std::path::{Component, Path};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;

use crate::connect::DockerClient;
use crate::error::DockerError;

/// Packs the contents of `source` as entries under `target` (an absolute container path)
/// with the workspace's one deterministic tar writer ([`provenance::write_dir`]): symlinks are
/// stored as symlinks and never followed, so nothing outside the tree is ever read.
pub fn pack_dir(source: &Path, target: &str) -> std::io::Result<Vec<u8>> {
    provenance::pack_dir(source, target).map_err(std::io::Error::other)
}

/// Packs one file with `mode` at `target`.
pub fn pack_file(bytes: &[u8], target: &str, mode: u32) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(mode);
    header.set_mtime(chrono::Utc::now().timestamp().max(0) as u64);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, target.trim_start_matches('/'), bytes)?;
    builder.into_inner()
}

/// Empty directories at the absolute paths `dirs`, each with `mode`: what a container gets
/// before it starts, so no exec is needed to make them. Only the leaves are named: the engine
/// makes missing ancestors 0755 and leaves existing ones as the image has them, as
/// `mkdir -p` followed by a `chmod` of the leaves would.
pub fn pack_dirs(dirs: &[String], mode: u32) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for dir in dirs {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        header.set_mode(mode);
        header.set_mtime(chrono::Utc::now().timestamp().max(0) as u64);
        builder.append_data(&mut header, dir.trim_matches('/'), std::io::empty())?;
    }
    builder.into_inner()
}

/// The jail's root additions without the tests: the helper at `helper_path` (mode 0755), and
/// the empty `/.runner/out` and `/.runner/tests`, *without* the end-of-archive blocks, so the
/// tests' entries (or [`END_OF_ARCHIVE`]) can follow it in the same upload.
pub fn pack_jail_root_open(helper: &[u8], helper_path: &str) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (dir, mode) in [
        (".runner", 0o755),
        (".runner/out", 0o755),
        (".runner/tests", 0o755),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        header.set_mode(mode);
        builder.append_data(&mut header, dir, std::io::empty())?;
    }
    let mut header = tar::Header::new_gnu();
    header.set_size(helper.len() as u64);
    header.set_mode(0o755);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, helper_path.trim_start_matches('/'), helper)?;
    let mut tar = builder.into_inner()?;
    tar.truncate(tar.len() - END_OF_ARCHIVE.len());
    Ok(tar)
}

/// The two zero blocks that end a tar archive.
pub const END_OF_ARCHIVE: &[u8; 1024] = &[0; 1024];

/// Where the jail finds the tests it copies into the private `/tests`.
const JAIL_TESTS: &str = "/.runner/tests";

/// The tests under `/.runner/tests`, as a whole archive: uploaded into a warm jail's root, or
/// following [`pack_jail_root_open`] in a jail's first upload.
pub fn pack_tests(tests: &Path) -> std::io::Result<Vec<u8>> {
    pack_dir(tests, JAIL_TESTS)
}

/// Uploads a tar whose entry names are relative to `/`.
pub async fn upload(
    client: &DockerClient,
    container: &str,
    tar: Vec<u8>,
    what: &str,
) -> Result<(), DockerError> {
    upload_parts(client, container, vec![tar.into()], what).await
}

/// The most bytes of an upload handed to the engine's connection at once.
const UPLOAD_CHUNK: usize = 64 << 10;

/// Uploads the tar made of `parts` (one archive cut into pieces, only the last ending it) as
/// a stream of slices of them: the parts are shared, not copied (every jail's helper is the
/// same 1.5 MB), and the HTTP client buffers a slice at a time instead of a copy of the whole
/// body, which at 64 trials at once was most of the runner's memory.
pub async fn upload_parts(
    client: &DockerClient,
    container: &str,
    parts: Vec<bytes::Bytes>,
    what: &str,
) -> Result<(), DockerError> {
    let slices = parts.into_iter().flat_map(|part| {
        (0..part.len())
            .step_by(UPLOAD_CHUNK)
            .map(move |at| part.slice(at..(at + UPLOAD_CHUNK).min(part.len())))
    });
    let body = bollard::body_stream(futures_util::stream::iter(slices));
    let options = UploadToContainerOptionsBuilder::default().path("/").build();
    client
        .api()
        .upload_to_container(container, Some(options), body)
        .await
        .map_err(|e| DockerError::api(format!("uploading {what}"), e))
}

/// What a trial may still bring back to the host: a budget shared by the downloads it covers
/// (one for agent logs and artifacts, one for the verifier's outputs), so an agent cannot fill
/// the host's disk through any of them: bytes, and entries (an empty file, a directory or a
/// link costs no bytes but an inode and a tar header each, so millions of them are bounded by
/// their number).
#[derive(Debug)]
pub struct DownloadBudget {
    cap: u64,
    remaining: AtomicU64,
    entry_cap: u64,
    entries_left: AtomicU64,
}

impl DownloadBudget {
    /// A budget of `cap` bytes and the default entry cap (tests).
    #[cfg(test)]
    pub fn new(cap: u64) -> Self {
        Self::with_entries(cap, tasks::records::DEFAULT_DOWNLOAD_CAP_ENTRIES)
    }

    /// A budget of `cap` bytes and `entry_cap` entries.
    pub fn with_entries(cap: u64, entry_cap: u64) -> Self {
        Self {
            cap,
            remaining: AtomicU64::new(cap),
            entry_cap,
            entries_left: AtomicU64::new(entry_cap),
        }
    }

    /// The cap in bytes.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// The cap in entries.
    pub fn entry_cap(&self) -> u64 {
        self.entry_cap
    }

    /// Takes up to `wanted` bytes from the budget; returns how many were granted.
    fn take(&self, wanted: u64) -> u64 {
        let mut granted = 0;
        let _ = self
            .remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                granted = left.min(wanted);
                Some(left - granted)
            });
        granted
    }

    /// Takes one entry; false when none is left.
    fn take_entry(&self) -> bool {
        self.entries_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok()
    }
}

/// What a download left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DownloadReport {
    /// Entries not written: links, FIFOs, devices, paths leaving the target.
    pub skipped: Vec<String>,
    /// Files cut at the budget (a marker line ends each), relative to the target.
    pub truncated: Vec<String>,
    /// True when the budget ran out and the rest of the archive was not read.
    pub stopped_early: bool,
    /// True when it was the entry cap that ran out.
    pub entries_capped: bool,
}

/// Chunks in flight between the engine's stream and the unpacker; with the engine's chunk
/// size this bounds a download's memory to a few megabytes whatever the archive holds.
const CHANNEL_CHUNKS: usize = 16;

/// Downloads the contents of the container directory `source` into `target`, streaming the
/// archive to the unpacker (never holding it in memory) within `budget`. Only regular files and
/// directories are written: symlinks, FIFOs and devices an agent left in its logs are skipped
/// (and reported), so nothing on the host is ever reached through them.
pub async fn download_dir(
    client: &DockerClient,
    container: &str,
    source: &str,
    target: &Path,
    budget: Arc<DownloadBudget>,
) -> Result<DownloadReport, DockerError> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(source)
        .build();
    let stream = client
        .api()
        .download_from_container(container, Some(options));
    let (report, stream_error) = unpack_stream(stream, target, budget).await;
    let report = report.map_err(|source_error| DockerError::Io {
        operation: format!("unpacking {source} into {}", target.display()),
        source: source_error,
    })?;
    match stream_error {
        Some(e) if !report.stopped_early => {
            Err(DockerError::api(format!("downloading {source}"), e))
        }
        _ => Ok(report),
    }
}

/// Unpacks the tar arriving as `chunks` into `target` within `budget` (see
/// [`download_dir`]), on a blocking thread fed through a bounded channel. The unpacker's end
/// is the end: a stream that stays open past its archive (a warm jail's stdout, until its
/// helper exits) is not waited for. Returns the unpacker's report and the stream's error, if
/// it failed before the unpacker was done.
pub(crate) async fn unpack_stream<E>(
    chunks: impl futures_util::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    target: &Path,
    budget: Arc<DownloadBudget>,
) -> (std::io::Result<DownloadReport>, Option<E>) {
    let (sender, receiver) = tokio::sync::mpsc::channel::<bytes::Bytes>(CHANNEL_CHUNKS);
    let target = target.to_path_buf();
    let mut unpacker = tokio::task::spawn_blocking(move || {
        unpack_stripped(ChannelReader::new(receiver), &target, &budget)
    });
    let forward = async move {
        let mut chunks = chunks;
        while let Some(chunk) = chunks.next().await {
            match chunk {
                // A closed channel means the unpacker stopped (budget spent, or a write
                // failed): dropping the stream closes the connection instead of draining it.
                Ok(bytes) => {
                    if sender.send(bytes).await.is_err() {
                        return None;
                    }
                }
                Err(e) => return Some(e),
            }
        }
        None
    };
    let joined = |joined: Result<std::io::Result<DownloadReport>, tokio::task::JoinError>| {
        joined.unwrap_or_else(|e| Err(std::io::Error::other(e)))
    };
    let mut forward = std::pin::pin!(forward);
    tokio::select! {
        report = &mut unpacker => (joined(report), None),
        stream_error = &mut forward => (joined(unpacker.await), stream_error),
    }
}

/// A blocking reader over the chunks the async side sends.
struct ChannelReader {
    receiver: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    current: bytes::Bytes,
}

impl ChannelReader {
    fn new(receiver: tokio::sync::mpsc::Receiver<bytes::Bytes>) -> Self {
        Self {
            receiver,
            current: bytes::Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.receiver.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
    }
}

/// Unpacks a tar whose first path component is the downloaded directory's own name, within
/// `budget`: a file past it is cut and ends with a marker line, and nothing after it is read;
/// every entry (skipped ones too: each was read) takes one of the budget's entries, and when
/// none is left nothing more is read.
pub(crate) fn unpack_stripped(
    reader: impl Read,
    target: &Path,
    budget: &DownloadBudget,
) -> std::io::Result<DownloadReport> {
    std::fs::create_dir_all(target)?;
    let mut archive = tar::Archive::new(reader);
    let mut report = DownloadReport::default();
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !budget.take_entry() {
            report.entries_capped = true;
            report.stopped_early = true;
            return Ok(report);
        }
        let path = entry.path()?.into_owned();
        let rel: std::path::PathBuf = path.components().skip(1).collect();
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            report.skipped.push(rel.display().to_string());
            continue;
        }
        let dest = target.join(&rel);
        match entry.header().entry_type() {
            tar::EntryType::Directory => std::fs::create_dir_all(&dest)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                // Replace, never write through, whatever is at the destination.
                if std::fs::symlink_metadata(&dest).is_ok_and(|m| !m.is_dir()) {
                    std::fs::remove_file(&dest)?;
                }
                let size = entry.header().size()?;
                let granted = budget.take(size);
                let mut file = std::fs::File::create(&dest)?;
                std::io::copy(&mut (&mut entry).take(granted), &mut file)?;
                if granted < size {
                    writeln!(
                        file,
                        "\n[runner: cut at {granted} of {size} bytes: the trial's download cap of {} bytes was reached]",
                        budget.cap()
                    )?;
                    report.truncated.push(rel.display().to_string());
                    report.stopped_early = true;
                    return Ok(report);
                }
            }
            _ => report.skipped.push(rel.display().to_string()),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_then_unpack_round_trips_and_skips_symlinks() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("a/b")).unwrap();
        std::fs::write(src.path().join("a/b/file.txt"), "hello").unwrap();
        std::fs::write(src.path().join("top.sh"), "#!/bin/sh").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let tar = pack_dir(src.path(), "/logs/verifier").unwrap();
        let dst = tempfile::tempdir().unwrap();
        // The engine's download names entries after the directory's basename, like this pack.
        let skipped = unpack_stripped(&tar[..], dst.path(), &DownloadBudget::new(1 << 20))
            .unwrap()
            .skipped;
        // Entries here are "logs/verifier/...": stripping one component leaves "verifier/...".
        assert_eq!(
            std::fs::read_to_string(dst.path().join("verifier/a/b/file.txt")).unwrap(),
            "hello"
        );
        assert!(dst.path().join("verifier/top.sh").is_file());
        assert!(std::fs::symlink_metadata(dst.path().join("verifier/link")).is_err());
        assert_eq!(skipped, vec!["verifier/link".to_string()]);
    }

    #[test]
    fn a_file_past_the_budget_is_cut_with_a_marker_and_the_rest_is_not_read() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a.txt"), vec![b'a'; 100]).unwrap();
        std::fs::write(src.path().join("b.txt"), vec![b'b'; 100]).unwrap();
        std::fs::write(src.path().join("c.txt"), vec![b'c'; 100]).unwrap();
        let tar = pack_dir(src.path(), "/logs/agent").unwrap();
        let dst = tempfile::tempdir().unwrap();
        let budget = DownloadBudget::new(150);
        let report = unpack_stripped(&tar[..], dst.path(), &budget).unwrap();
        let agent = dst.path().join("agent");
        assert_eq!(std::fs::read(agent.join("a.txt")).unwrap().len(), 100);
        let cut = std::fs::read_to_string(agent.join("b.txt")).unwrap();
        assert!(cut.starts_with(&"b".repeat(50)), "{cut}");
        assert!(cut.contains("cut at 50 of 100 bytes"), "{cut}");
        assert!(!agent.join("c.txt").exists());
        assert_eq!(report.truncated, vec!["agent/b.txt".to_string()]);
        assert!(report.stopped_early);
        assert_eq!(budget.take(10), 0);
    }

    #[test]
    fn empty_entries_are_bounded_by_number_and_the_rest_is_not_read() {
        let src = tempfile::tempdir().unwrap();
        for i in 0..50 {
            std::fs::write(src.path().join(format!("empty-{i:02}")), "").unwrap();
        }
        let tar = pack_dir(src.path(), "/logs/agent").unwrap();
        let budget = DownloadBudget::with_entries(1 << 20, 20);
        let dst = tempfile::tempdir().unwrap();
        let report = unpack_stripped(&tar[..], dst.path(), &budget).unwrap();
        assert!(report.entries_capped && report.stopped_early);
        let written = std::fs::read_dir(dst.path().join("agent")).unwrap().count();
        assert_eq!(written, 20, "exactly the cap");
        // The budget is the trial's: a second download gets nothing.
        let again = tempfile::tempdir().unwrap();
        let report = unpack_stripped(&tar[..], again.path(), &budget).unwrap();
        assert!(report.entries_capped);
        assert_eq!(std::fs::read_dir(again.path()).unwrap().count(), 0);
    }
}
