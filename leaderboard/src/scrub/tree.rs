//! Copying a job directory into the staging directory: sorted walk, names scrubbed, symlinks
//! kept as symlinks (never followed), file contents scrubbed in parallel.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tasks::walk::{Entry, Kind, Links, Next, TreeWalk, Visitor, WalkError};

use super::content::{Budget, scrub_blob};
use super::error::ScrubError;
use super::findings::{Findings, Location};
use super::matcher::{Matcher, Tally};

/// A file left out of the copy because it cannot be scrubbed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Dropped {
    /// Output-relative path (already scrubbed).
    pub path: String,
    /// Why it cannot be scrubbed.
    pub reason: String,
}

/// The result of copying the tree.
#[derive(Debug, Default)]
pub struct Copied {
    /// Redaction counts.
    pub findings: Findings,
    /// Files not written.
    pub unscannable: Vec<Dropped>,
    /// Regular files read.
    pub files: u64,
    /// Bytes read from regular files.
    pub bytes: u64,
}

/// A regular file to scrub.
struct FileJob {
    source: PathBuf,
    dest: PathBuf,
    shown: String,
}

/// Copies `input` into the existing empty directory `stage`.
pub fn copy_tree(m: &Matcher, input: &Path, stage: &Path) -> Result<Copied, ScrubError> {
    let mut copied = Copied::default();
    let mut staging = Stage {
        m,
        jobs: Vec::new(),
        copied: &mut copied,
        open: vec![Frame::new(stage.to_owned(), String::new())],
    };
    // `Keep`: a job directory is copied as it is, a link as a link (its target scrubbed),
    // never followed.
    TreeWalk::new(input, Links::Keep)
        .walk(&mut staging)
        .map_err(|stop| {
            stop.into_error(|e| match e {
                WalkError::Io { path, source } => ScrubError::io(path)(source),
                other => ScrubError::io(input)(std::io::Error::other(other.to_string())),
            })
        })?;
    let jobs = staging.jobs;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let shared = Mutex::new(&mut copied);
    let first_error: Mutex<Option<ScrubError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut local = Copied::default();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(index) else { break };
                    if let Err(e) = copy_file(m, job, &mut local) {
                        first_error.lock().unwrap().get_or_insert(e);
                        break;
                    }
                }
                let mut total = shared.lock().unwrap();
                total.findings.merge(local.findings);
                total.unscannable.extend(local.unscannable);
                total.files += local.files;
                total.bytes += local.bytes;
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap() {
        return Err(e);
    }
    copied.unscannable.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(copied)
}

/// Largest file scrub reads: it holds each file (and its rewritten copy) in memory. Sized above
/// the per-trial caps on downloaded logs; a larger file is unscannable.
pub const MAX_FILE_BYTES: u64 = 512 << 20;

/// Reads, scrubs and writes one regular file, keeping its permission bits.
fn copy_file(m: &Matcher, job: &FileJob, copied: &mut Copied) -> Result<(), ScrubError> {
    let bytes = match tasks::bounded::read_capped(&job.source, MAX_FILE_BYTES, "file to scrub") {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            copied.files += 1;
            copied.unscannable.push(Dropped {
                path: job.shown.clone(),
                reason: format!("unscannable: {e} (scrub holds each file in memory)"),
            });
            return Ok(());
        }
        Err(e) => return Err(ScrubError::io(&job.source)(e)),
    };
    copied.files += 1;
    copied.bytes += bytes.len() as u64;
    let mut budget = Budget::for_file();
    match scrub_blob(m, &bytes, &job.shown, 0, &mut budget, &mut copied.findings) {
        Ok(out) => {
            std::fs::write(&job.dest, out.as_deref().unwrap_or(&bytes))
                .map_err(ScrubError::io(&job.dest))?;
            let mode = std::fs::metadata(&job.source)
                .map_err(ScrubError::io(&job.source))?
                .permissions()
                .mode();
            std::fs::set_permissions(&job.dest, std::fs::Permissions::from_mode(mode & 0o777))
                .map_err(ScrubError::io(&job.dest))?;
        }
        Err(reason) => copied.unscannable.push(Dropped {
            path: job.shown.clone(),
            reason: reason.to_string(),
        }),
    }
    Ok(())
}

/// One copy's staging walk: the regular files queued, and for each directory open on the
/// current path where it goes and the names already used in it.
struct Stage<'a, 'm> {
    m: &'m Matcher,
    jobs: Vec<FileJob>,
    copied: &'a mut Copied,
    open: Vec<Frame>,
}

/// A directory being copied.
struct Frame {
    dest: PathBuf,
    shown: String,
    used: HashSet<Vec<u8>>,
}

impl Frame {
    fn new(dest: PathBuf, shown: String) -> Self {
        Self {
            dest,
            shown,
            used: HashSet::new(),
        }
    }
}

impl Visitor for Stage<'_, '_> {
    type Error = ScrubError;

    /// Creates directories and symlinks in the copy and queues regular files, in walk order
    /// (byte order of names, a directory before its contents).
    fn visit(&mut self, entry: &Entry) -> Result<Next, ScrubError> {
        let name = &entry.name;
        // The job's digest key for host-drawn task env values stays on the host: published,
        // it would let anyone test guesses of those values against the trial identities.
        if name == tasks::template::KEY_FILE {
            return Ok(Next::Pass);
        }
        let Some(frame) = self.open.last_mut() else {
            return Ok(Next::Stop);
        };
        let from = entry.path.clone();
        let mut tally = Tally::new();
        let new_name = unique(
            self.m
                .redact_text(name.as_bytes(), &mut tally)
                .unwrap_or_else(|| name.as_bytes().to_vec()),
            &mut frame.used,
        );
        let to = frame.dest.join(OsString::from_vec(new_name.clone()));
        let rel = if frame.shown.is_empty() {
            String::from_utf8_lossy(&new_name).into_owned()
        } else {
            format!("{}/{}", frame.shown, String::from_utf8_lossy(&new_name))
        };
        self.copied.findings.add(&rel, Location::Name, tally);
        match entry.kind {
            Kind::Dir => {
                std::fs::create_dir(&to).map_err(ScrubError::io(&to))?;
                self.open.push(Frame::new(to, rel));
            }
            Kind::Link(_) => {
                let target = std::fs::read_link(&from).map_err(ScrubError::io(&from))?;
                let mut tally = Tally::new();
                let target = self
                    .m
                    .redact_text(target.as_os_str().as_bytes(), &mut tally)
                    .map(OsString::from_vec)
                    .unwrap_or(target.into_os_string());
                self.copied.findings.add(&rel, Location::LinkTarget, tally);
                std::os::unix::fs::symlink(&target, &to).map_err(ScrubError::io(&to))?;
            }
            Kind::File => self.jobs.push(FileJob {
                source: from,
                dest: to,
                shown: rel,
            }),
            Kind::Special => self.copied.unscannable.push(Dropped {
                path: rel,
                reason: "special file (fifo, socket or device)".into(),
            }),
        }
        Ok(Next::Enter)
    }

    fn leave(&mut self, _dir: &Entry) -> Result<(), ScrubError> {
        self.open.pop();
        Ok(())
    }
}

/// `name`, or `name~2`, `name~3`… when redaction made two names in one directory equal.
fn unique(name: Vec<u8>, used: &mut HashSet<Vec<u8>>) -> Vec<u8> {
    let mut candidate = name.clone();
    let mut n = 2;
    while !used.insert(candidate.clone()) {
        candidate = [&name[..], format!("~{n}").as_bytes()].concat();
        n += 1;
    }
    candidate
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use crate::scrub::{ScrubOptions, ScrubOutcome, SecretSetBuilder, scrub};

    fn options(input: &std::path::Path, output: &std::path::Path) -> ScrubOptions {
        let mut builder = SecretSetBuilder::new(false);
        builder
            .add_pair("--secret", 1, "TOKEN=abcdefghijklmnop")
            .unwrap();
        ScrubOptions {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
            secrets: builder.build().unwrap(),
            drop_unscannable: false,
            disabled_forms: Vec::new(),
        }
    }

    #[test]
    fn a_bomb_and_an_oversized_file_abort_the_scrub_as_unscannable() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("job");
        std::fs::create_dir_all(input.join("trial/artifacts")).unwrap();
        std::fs::write(input.join("trial/notes.txt"), "token abcdefghijklmnop\n").unwrap();
        // 512 MiB of zeros in gzip members of 32 MiB: about 2.5 MB on disk.
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&vec![0u8; 32 << 20]).unwrap();
        let member = encoder.finish().unwrap();
        std::fs::write(input.join("trial/artifacts/bomb.tar.gz"), member.repeat(16)).unwrap();
        std::fs::File::create(input.join("trial/huge.log"))
            .unwrap()
            .set_len(super::MAX_FILE_BYTES + 1)
            .unwrap();
        let output = dir.path().join("public");
        let ScrubOutcome::Aborted(report) = scrub(&options(&input, &output)).unwrap() else {
            panic!("a bomb must abort the scrub");
        };
        let listed: Vec<(&str, &str)> = report
            .unscannable
            .iter()
            .map(|d| (d.path.as_str(), d.reason.as_str()))
            .collect();
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert_eq!(listed[0].0, "trial/artifacts/bomb.tar.gz");
        assert!(
            listed[0].1.contains("256 MiB decompression limit"),
            "{listed:?}"
        );
        assert_eq!(listed[1].0, "trial/huge.log");
        assert!(listed[1].1.contains("512 MiB limit"), "{listed:?}");
        assert!(!output.exists());
    }

    #[test]
    fn the_jobs_task_env_key_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("job");
        std::fs::create_dir_all(input.join("trial")).unwrap();
        std::fs::write(input.join(".task-env-key"), "00".repeat(32)).unwrap();
        std::fs::write(input.join("trial/result.json"), "{}").unwrap();
        let output = dir.path().join("public");
        let ScrubOutcome::Written(_) = scrub(&options(&input, &output)).unwrap() else {
            panic!("the scrub must write");
        };
        assert!(output.join("trial/result.json").is_file());
        assert!(!output.join(".task-env-key").exists());
    }
}
