//! Scrubbing one blob of bytes by kind: text, binary, gzip and tar (recursively, repacked).

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use tar::EntryType;

use super::classify::{Kind, classify};
use super::findings::{Findings, Location};
use super::matcher::{Matcher, Tally};

/// How deep archives may nest (a tar.gz inside a tar counts two levels).
pub const MAX_DEPTH: usize = 6;
/// Most bytes decompressed from all the gzip streams inside one file, nested ones included.
/// Sized for real job dirs (artifact tarballs of a few hundred MB at most); a compression bomb
/// past it is unscannable. Streams are measured before they are decoded into memory, so a bomb
/// costs no memory at all.
pub const MAX_EXPANDED: u64 = 256 << 20;

/// Why a file cannot be scrubbed (it is then left out of the copy, with this reason).
#[derive(Debug, thiserror::Error)]
pub enum Unscannable {
    /// Archives nest deeper than [`MAX_DEPTH`].
    #[error("archives nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// A format whose contents this scrub cannot search (zip, bzip2, ...).
    #[error("{0}: its contents cannot be searched")]
    Opaque(&'static str),
    /// The file's gzip data expands past its share of [`MAX_EXPANDED`].
    #[error(
        "unscannable: its gzip data expands beyond the {} MiB decompression limit of scrub \
         (a compression bomb, or an archive too large to check)",
        MAX_EXPANDED >> 20
    )]
    ExpandsTooFar,
    /// A gzip stream cannot be decoded.
    #[error("corrupt gzip stream ({0})")]
    CorruptGzip(#[source] std::io::Error),
    /// Recompressing the scrubbed content failed.
    #[error("{0}")]
    Recompress(#[source] std::io::Error),
    /// A pax header holds a secret; it cannot be rewritten without changing the member.
    #[error("a pax header in the tar archive holds a secret")]
    SecretInPaxHeader,
    /// The tar archive cannot be read.
    #[error("unreadable tar archive ({0})")]
    UnreadableTar(#[source] std::io::Error),
    /// The tar archive has sparse members, which cannot be repacked faithfully.
    #[error("tar archive with sparse members")]
    SparseTar,
    /// Writing the scrubbed archive failed.
    #[error("cannot rebuild tar archive ({0})")]
    RebuildTar(#[source] std::io::Error),
}

/// What is left of one file's decompression allowance ([`MAX_EXPANDED`]).
#[derive(Debug)]
pub struct Budget {
    remaining: u64,
}

impl Budget {
    /// The allowance of one file found in the job dir.
    pub fn for_file() -> Budget {
        Budget::new(MAX_EXPANDED)
    }

    /// An allowance of `bytes`.
    fn new(bytes: u64) -> Budget {
        Budget { remaining: bytes }
    }
}

/// Scrubs `bytes` found at report path `path`. Returns the new bytes, `None` when nothing changed
/// (so clean files are copied byte-for-byte), or the reason it cannot be scrubbed.
pub fn scrub_blob(
    m: &Matcher,
    bytes: &[u8],
    path: &str,
    depth: usize,
    budget: &mut Budget,
    findings: &mut Findings,
) -> Result<Option<Vec<u8>>, Unscannable> {
    Nested {
        m,
        budget,
        findings,
    }
    .blob(bytes, path, depth)
}

/// What every nesting level of one file shares: the matcher, the file's decompression budget
/// and its findings.
struct Nested<'a> {
    m: &'a Matcher,
    budget: &'a mut Budget,
    findings: &'a mut Findings,
}

impl Nested<'_> {
    /// [`scrub_blob`] at archive depth `depth`.
    fn blob(
        &mut self,
        bytes: &[u8],
        path: &str,
        depth: usize,
    ) -> Result<Option<Vec<u8>>, Unscannable> {
        if depth > MAX_DEPTH {
            return Err(Unscannable::TooDeep);
        }
        let m = self.m;
        let mut tally = Tally::new();
        let out = match classify(bytes) {
            Kind::Text => m.redact_text(bytes, &mut tally),
            Kind::Binary => m.redact_binary(bytes, &mut tally),
            Kind::Gzip => return self.gzip(bytes, path, depth),
            Kind::Tar => return self.tar(bytes, path, depth),
            Kind::Unscannable(what) => {
                return Err(Unscannable::Opaque(what));
            }
        };
        self.findings.add(path, Location::Content, tally);
        Ok(out)
    }

    /// Decompresses every gzip member, scrubs the content, and recompresses when anything
    /// changed or the gzip header itself (file name, comment) holds a needle.
    fn gzip(
        &mut self,
        bytes: &[u8],
        path: &str,
        depth: usize,
    ) -> Result<Option<Vec<u8>>, Unscannable> {
        // Measure first, so a bomb is refused before a byte of it is held in memory.
        let len = decoded_len(bytes, self.budget.remaining)?;
        if len > self.budget.remaining {
            return Err(Unscannable::ExpandsTooFar);
        }
        self.budget.remaining -= len;
        let mut decoded = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        MultiGzDecoder::new(bytes)
            .take(len)
            .read_to_end(&mut decoded)
            .map_err(Unscannable::CorruptGzip)?;
        let inner = self.blob(&decoded, path, depth + 1)?;
        if inner.is_none() && !self.m.raw_match(bytes) {
            return Ok(None);
        }
        // A fresh header: no name, no comment, mtime 0, so the output is reproducible.
        let mut encoder = flate2::GzBuilder::new().write(Vec::new(), Compression::default());
        encoder
            .write_all(inner.as_deref().unwrap_or(&decoded))
            .map_err(Unscannable::Recompress)?;
        encoder.finish().map(Some).map_err(Unscannable::Recompress)
    }

    /// Scrubs every member's name, link target and content; rebuilds the archive (same headers,
    /// new names and sizes) only when something changed.
    fn tar(
        &mut self,
        bytes: &[u8],
        path: &str,
        depth: usize,
    ) -> Result<Option<Vec<u8>>, Unscannable> {
        let m = self.m;
        let members = read_members(bytes)?;
        let mut changed = false;
        let mut rebuilt = Vec::with_capacity(members.len());
        for member in members {
            let mut tally = Tally::new();
            let new_path = m.redact_text(&member.path, &mut tally);
            let shown = format!(
                "{path}!{}",
                String::from_utf8_lossy(new_path.as_deref().unwrap_or(&member.path))
            );
            self.findings.add(&shown, Location::Name, tally);
            let mut tally = Tally::new();
            let new_link = member
                .link
                .as_ref()
                .and_then(|l| m.redact_text(l, &mut tally));
            self.findings.add(&shown, Location::LinkTarget, tally);
            let kind = member.header.entry_type();
            let new_data = if kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
                // Rewriting pax records would break their length prefixes.
                if m.raw_match(&member.data) {
                    return Err(Unscannable::SecretInPaxHeader);
                }
                None
            } else {
                self.blob(&member.data, &shown, depth + 1)?
            };
            changed |= new_path.is_some() || new_link.is_some() || new_data.is_some();
            rebuilt.push(Member {
                path: new_path.unwrap_or(member.path),
                link: new_link.or(member.link),
                data: new_data.unwrap_or(member.data),
                header: member.header,
            });
        }
        // Header fields (owner names, pax records) could also hold a value.
        if !changed && !m.raw_match(bytes) {
            return Ok(None);
        }
        write_tar(rebuilt).map(Some)
    }
}

/// How many bytes `bytes` decompress to, counting at most `limit + 1` (nothing is kept).
fn decoded_len(bytes: &[u8], limit: u64) -> Result<u64, Unscannable> {
    std::io::copy(
        &mut MultiGzDecoder::new(bytes).take(limit + 1),
        &mut std::io::sink(),
    )
    .map_err(Unscannable::CorruptGzip)
}

/// One member read out of a tar archive.
struct Member {
    header: tar::Header,
    path: Vec<u8>,
    link: Option<Vec<u8>>,
    data: Vec<u8>,
}

fn read_members(bytes: &[u8]) -> Result<Vec<Member>, Unscannable> {
    let mut archive = tar::Archive::new(bytes);
    let mut members = Vec::new();
    for entry in archive.entries().map_err(Unscannable::UnreadableTar)? {
        let mut entry = entry.map_err(Unscannable::UnreadableTar)?;
        let header = entry.header().clone();
        if header.entry_type() == EntryType::GNUSparse {
            return Err(Unscannable::SparseTar);
        }
        let path = entry.path_bytes().into_owned();
        let link = entry.link_name_bytes().map(|l| l.into_owned());
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(Unscannable::UnreadableTar)?;
        members.push(Member {
            header,
            path,
            link,
            data,
        });
    }
    Ok(members)
}

fn write_tar(members: Vec<Member>) -> Result<Vec<u8>, Unscannable> {
    let mut builder = tar::Builder::new(Vec::new());
    for mut member in members {
        let kind = member.header.entry_type();
        if kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
        {
            // The builder re-creates long names itself; pax records are dropped with them.
            continue;
        }
        let path = String::from_utf8_lossy(&member.path).into_owned();
        member.header.set_size(member.data.len() as u64);
        let result = match &member.link {
            Some(link) => {
                let link = String::from_utf8_lossy(link).into_owned();
                builder.append_link(&mut member.header, &path, &link)
            }
            None => builder.append_data(&mut member.header, &path, &member.data[..]),
        };
        result.map_err(Unscannable::RebuildTar)?;
    }
    builder.into_inner().map_err(Unscannable::RebuildTar)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrub::secrets::SecretSetBuilder;

    fn matcher() -> Matcher {
        let mut b = SecretSetBuilder::new(false);
        b.add_pair("--secret", 1, "TOKEN=abcdefghijklmnop").unwrap();
        Matcher::new(&b.build().unwrap(), &[]).unwrap()
    }

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            builder.append_data(&mut header, name, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    /// Scrubs `bytes` as a whole file: depth 0, a fresh per-file budget, findings unread.
    fn scrub_top_level(
        m: &Matcher,
        bytes: &[u8],
        path: &str,
    ) -> Result<Option<Vec<u8>>, Unscannable> {
        scrub_blob(
            m,
            bytes,
            path,
            0,
            &mut Budget::for_file(),
            &mut Findings::default(),
        )
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn repacks_tar_gz_with_names_and_contents_scrubbed() {
        let m = matcher();
        let tgz = gzip(&tar_of(&[
            ("dir/abcdefghijklmnop.txt", b"key abcdefghijklmnop\n"),
            ("clean.txt", b"ok\n"),
        ]));
        let mut findings = Findings::default();
        let out = scrub_blob(&m, &tgz, "a.tgz", 0, &mut Budget::for_file(), &mut findings)
            .unwrap()
            .unwrap();
        let mut tar_bytes = Vec::new();
        MultiGzDecoder::new(&out[..])
            .read_to_end(&mut tar_bytes)
            .unwrap();
        let members = read_members(&tar_bytes).unwrap();
        assert_eq!(members[0].path, b"dir/[REDACTED:TOKEN].txt");
        assert_eq!(members[0].data, b"key [REDACTED:TOKEN]\n");
        assert_eq!(members[1].data, b"ok\n");
        let paths: Vec<_> = findings
            .entries
            .keys()
            .map(|(p, l)| (p.as_str(), *l))
            .collect();
        assert!(paths.contains(&("a.tgz!dir/[REDACTED:TOKEN].txt", Location::Name)));
        assert!(paths.contains(&("a.tgz!dir/[REDACTED:TOKEN].txt", Location::Content)));
    }

    #[test]
    fn clean_archives_are_untouched_and_opaque_ones_refused() {
        let m = matcher();
        let tgz = gzip(&tar_of(&[("clean.txt", b"ok\n")]));
        assert_eq!(scrub_top_level(&m, &tgz, "a").unwrap(), None);
        let inner_zip = tar_of(&[("x.zip", b"PK\x03\x04rest")]);
        let err = scrub_top_level(&m, &inner_zip, "a")
            .unwrap_err()
            .to_string();
        assert!(err.contains("zip"), "{err}");
        let corrupt = b"\x1f\x8b\x08\x00garbage".to_vec();
        assert!(
            scrub_top_level(&m, &corrupt, "a")
                .unwrap_err()
                .to_string()
                .contains("gzip")
        );
    }

    /// A gzip file of `members` members, each `member_len` zero bytes: tiny on disk, large
    /// decoded (the shape of a compression bomb).
    fn bomb(members: usize, member_len: usize) -> Vec<u8> {
        gzip(&vec![0u8; member_len]).repeat(members)
    }

    #[test]
    fn a_gzip_bomb_is_unscannable_and_never_decoded_into_memory() {
        let m = matcher();
        // 320 MiB decoded from about 1.5 MB.
        let data = bomb(5, 64 << 20);
        assert!(data.len() < 2 << 20, "{}", data.len());
        let err = scrub_top_level(&m, &data, "bomb.gz")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("unscannable:") && err.contains("256 MiB decompression limit"),
            "{err}"
        );
    }

    #[test]
    fn the_decompression_budget_covers_nested_archives_together() {
        let m = matcher();
        // A tar.gz holding two gzip files of 600 bytes each: the tar itself, then 1,200 bytes.
        let inner = bomb(1, 600);
        let tar = tar_of(&[("a.gz", &inner), ("b.gz", &inner)]);
        let tgz = gzip(&tar);
        let run = |allowance: usize| {
            let mut budget = Budget::new(allowance as u64);
            scrub_blob(&m, &tgz, "t", 0, &mut budget, &mut Findings::default())
        };
        assert!(matches!(run(tar.len() + 1200), Ok(None)));
        let err = run(tar.len() + 1199).unwrap_err().to_string();
        assert!(err.contains("decompression limit"), "{err}");
    }
}
