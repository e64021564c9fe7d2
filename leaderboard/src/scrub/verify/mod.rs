//! The independent verification pass: re-reads the written copy from disk and searches it again
//! for every needle (own search code, own line/escape stripping, own archive walking), plus the
//! provider-key pattern as a second net for credentials nobody declared.

mod finder;
mod strip;

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use flate2::read::MultiGzDecoder;
use serde::Serialize;

use self::finder::Finder;
use super::error::ScrubError;
use super::findings::Location;
use super::forms::Needle;

/// Form label used for provider-key-shaped strings that match no declared secret.
pub const PROVIDER_KEY_FORM: &str = "provider-key-pattern";
/// Form label for content the verifier cannot look into.
pub const UNVERIFIABLE_FORM: &str = "unverifiable-content";
/// Deepest archive nesting the verifier follows.
const MAX_DEPTH: usize = 8;
/// Most bytes one gzip stream of the copy may decode to. The scrubber only writes archives
/// within its own limit ([`super::content::MAX_EXPANDED`]); twice that leaves room for
/// redaction markers longer than the values they replace, and anything beyond is unverifiable.
const MAX_EXPANDED: u64 = 2 * super::content::MAX_EXPANDED;

/// Something found in the written copy. Names a file and a form, never a value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Leftover {
    /// Output-relative path (`a.tar.gz!member` inside archives).
    pub path: String,
    /// Where in the file.
    pub location: Location,
    /// The secret's name, or `None` for an undeclared provider-key-shaped string.
    pub secret: Option<String>,
    /// The form found.
    pub form: String,
}

/// The verifier's needle tables.
pub struct Verifier {
    labels: Vec<(Option<String>, String)>,
    raw: Finder,
    stripped: Finder,
}

impl Verifier {
    /// Builds search tables for `needles` of secrets named `names`.
    pub fn new(needles: &[Needle], names: &[String]) -> Self {
        let labels = needles
            .iter()
            .map(|n| (Some(names[n.secret].clone()), n.form.label()))
            .collect();
        let raw = Finder::new(needles.iter().map(|n| n.bytes.clone()).collect());
        let stripped = Finder::new(needles.iter().map(|n| strip::strip(&n.bytes)).collect());
        Verifier {
            labels,
            raw,
            stripped,
        }
    }

    /// How many literal needles are searched for.
    pub fn needle_count(&self) -> usize {
        self.labels.len()
    }

    /// Verifies every name, symlink target and file below `root`. Returns leftovers (sorted) and
    /// the number of bytes read.
    pub fn verify_tree(&self, root: &Path) -> Result<(Vec<Leftover>, u64), ScrubError> {
        let mut found = BTreeSet::new();
        let mut files = Vec::new();
        self.walk(root, "", &mut files, &mut found)?;
        let next = AtomicUsize::new(0);
        let total = Mutex::new((found, 0u64));
        let error: Mutex<Option<ScrubError>> = Mutex::new(None);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(files.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let mut local = BTreeSet::new();
                    let mut bytes = 0u64;
                    while let Some((path, shown)) = files.get(next.fetch_add(1, Ordering::Relaxed))
                    {
                        match std::fs::read(path) {
                            Ok(data) => {
                                bytes += data.len() as u64;
                                self.inspect(&data, shown, 0, &mut local);
                            }
                            Err(source) => {
                                error.lock().unwrap().get_or_insert(ScrubError::Io {
                                    path: path.clone(),
                                    source,
                                });
                                break;
                            }
                        }
                    }
                    let mut total = total.lock().unwrap();
                    total.0.extend(local);
                    total.1 += bytes;
                });
            }
        });
        if let Some(e) = error.into_inner().unwrap() {
            return Err(e);
        }
        let (found, bytes) = total.into_inner().unwrap();
        Ok((found.into_iter().collect(), bytes))
    }

    /// Verifies one in-memory blob (the report) shown as `shown`.
    pub fn verify_bytes(&self, data: &[u8], shown: &str) -> Vec<Leftover> {
        let mut found = BTreeSet::new();
        self.inspect(data, shown, 0, &mut found);
        found.into_iter().collect()
    }

    fn walk(
        &self,
        dir: &Path,
        shown: &str,
        files: &mut Vec<(PathBuf, String)>,
        found: &mut BTreeSet<Leftover>,
    ) -> Result<(), ScrubError> {
        for entry in std::fs::read_dir(dir).map_err(ScrubError::io(dir))? {
            let entry = entry.map_err(ScrubError::io(dir))?;
            let name = entry.file_name();
            let rel = if shown.is_empty() {
                name.to_string_lossy().into_owned()
            } else {
                format!("{shown}/{}", name.to_string_lossy())
            };
            self.search(name.as_bytes(), &rel, Location::Name, true, found);
            let path = entry.path();
            let kind = entry.file_type().map_err(ScrubError::io(&path))?;
            if kind.is_symlink() {
                let target = std::fs::read_link(&path).map_err(ScrubError::io(&path))?;
                self.search(
                    target.as_os_str().as_bytes(),
                    &rel,
                    Location::LinkTarget,
                    true,
                    found,
                );
            } else if kind.is_dir() {
                self.walk(&path, &rel, files, found)?;
            } else {
                files.push((path, rel));
            }
        }
        Ok(())
    }

    /// Searches raw bytes (and the stripped view when `text`), recording leftovers.
    fn search(
        &self,
        data: &[u8],
        shown: &str,
        location: Location,
        text: bool,
        found: &mut BTreeSet<Leftover>,
    ) {
        let mut record = |index: usize, _at: usize| {
            let (secret, form) = &self.labels[index];
            found.insert(Leftover {
                path: shown.to_string(),
                location,
                secret: secret.clone(),
                form: form.clone(),
            });
        };
        self.raw.each_hit(data, &mut record);
        if text {
            let view = strip::strip(data);
            if view.len() != data.len() {
                self.stripped.each_hit(&view, &mut record);
            }
        }
        for m in ::secrets::provider_key_bytes_pattern().find_iter(data) {
            // Require a boundary on the left, so `task-…` or `disk-…` does not read as `sk-…`.
            if m.start() > 0 && data[m.start() - 1].is_ascii_alphanumeric() {
                continue;
            }
            found.insert(Leftover {
                path: shown.to_string(),
                location,
                secret: None,
                form: PROVIDER_KEY_FORM.to_string(),
            });
        }
    }

    /// Searches a file's bytes, then looks inside gzip and tar containers.
    fn inspect(&self, data: &[u8], shown: &str, depth: usize, found: &mut BTreeSet<Leftover>) {
        let unverifiable = |found: &mut BTreeSet<Leftover>| {
            found.insert(Leftover {
                path: shown.to_string(),
                location: Location::Content,
                secret: None,
                form: UNVERIFIABLE_FORM.to_string(),
            });
        };
        let is_text = !data.contains(&0);
        self.search(data, shown, Location::Content, is_text, found);
        if depth >= MAX_DEPTH {
            return unverifiable(found);
        }
        if data.starts_with(&[0x1f, 0x8b]) {
            // Measured before decoding, so an oversized stream is never held in memory.
            let measured = std::io::copy(
                &mut MultiGzDecoder::new(data).take(MAX_EXPANDED + 1),
                &mut std::io::sink(),
            );
            let mut plain = Vec::new();
            match measured {
                Ok(n) if n <= MAX_EXPANDED => {
                    plain.reserve_exact(usize::try_from(n).unwrap_or(0));
                    match MultiGzDecoder::new(data).take(n).read_to_end(&mut plain) {
                        Ok(_) => self.inspect(&plain, shown, depth + 1, found),
                        Err(_) => unverifiable(found),
                    }
                }
                _ => unverifiable(found),
            }
        } else if data.len() >= 512 && data[257..262] == *b"ustar" {
            if self.inspect_tar(data, shown, depth, found).is_err() {
                unverifiable(found);
            }
        } else if [
            &b"PK\x03\x04"[..],
            b"7z\xbc\xaf",
            b"Rar!",
            b"\xfd7zXZ",
            b"\x28\xb5\x2f\xfd",
        ]
        .iter()
        .any(|magic| data.starts_with(magic))
        {
            unverifiable(found);
        }
    }

    fn inspect_tar(
        &self,
        data: &[u8],
        shown: &str,
        depth: usize,
        found: &mut BTreeSet<Leftover>,
    ) -> std::io::Result<()> {
        let mut archive = tar::Archive::new(data);
        for entry in archive.entries()? {
            let mut entry = entry?;
            let member = format!("{shown}!{}", String::from_utf8_lossy(&entry.path_bytes()));
            self.search(&entry.path_bytes(), &member, Location::Name, true, found);
            if let Some(link) = entry.link_name_bytes() {
                self.search(&link, &member, Location::LinkTarget, true, found);
            }
            let mut content = Vec::new();
            entry.read_to_end(&mut content)?;
            self.inspect(&content, &member, depth + 1, found);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_gzip_stream_past_the_limit_is_unverifiable_not_decoded() {
        let verifier = Verifier::new(&[], &[]);
        let small = gzip(b"plain words\n");
        assert!(verifier.verify_bytes(&small, "ok.gz").is_empty());
        // 544 MiB decoded, past the verifier's 512 MiB.
        let bomb = gzip(&vec![0u8; 32 << 20]).repeat(17);
        let found = verifier.verify_bytes(&bomb, "bomb.gz");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].form, UNVERIFIABLE_FORM);
    }
}
