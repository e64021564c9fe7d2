//! Reading a submission's files with bounded memory: records are read whole only up to a cap
//! (`tasks::bounded`), and every other file is scanned for provider keys in chunks, so a 1 GB
//! log in a trial dir costs one chunk of memory, not a gigabyte.

use std::io::{self, Read};
use std::path::Path;

use super::scan;

/// Bytes scanned at a time for provider keys.
const CHUNK_BYTES: usize = 8 << 20;
/// How far back from a chunk's end a cut point is looked for when the chunk has no newline.
const CUT_SEARCH_BYTES: usize = 64 << 10;

/// 1-based line numbers of provider-key-shaped strings in the file at `path`, read
/// [`CHUNK_BYTES`] at a time. Chunks are cut after a newline, or, inside a longer line, after a
/// byte that no key contains, so no key spans two chunks (except inside a run of key
/// characters longer than [`CUT_SEARCH_BYTES`], which no real file has).
pub fn key_lines_in_file(path: &Path) -> io::Result<Vec<usize>> {
    key_lines_in(std::fs::File::open(path)?, CHUNK_BYTES)
}

fn key_lines_in(mut reader: impl Read, chunk: usize) -> io::Result<Vec<usize>> {
    let mut found = Vec::new();
    let mut buf: Vec<u8> = Vec::with_capacity(chunk);
    // Newlines in the bytes already scanned: the scanned part of the current line is line
    // `newlines + 1`.
    let mut newlines = 0;
    loop {
        let want = (chunk - buf.len()) as u64;
        (&mut reader).take(want).read_to_end(&mut buf)?;
        let at_end = buf.len() < chunk;
        let cut = if at_end { buf.len() } else { cut_point(&buf) };
        let piece = &buf[..cut];
        found.extend(scan::key_lines(piece).into_iter().map(|l| newlines + l));
        newlines += memchr::memchr_iter(b'\n', piece).count();
        buf.drain(..cut);
        if at_end {
            return Ok(found);
        }
    }
}

/// Where to end a full chunk: after its last newline, else after the last byte that cannot be
/// part of a key (keys are runs of letters, digits, `_` and `-`), else at its end.
fn cut_point(buf: &[u8]) -> usize {
    if let Some(i) = memchr::memrchr(b'\n', buf) {
        return i + 1;
    }
    let from = buf.len().saturating_sub(CUT_SEARCH_BYTES);
    buf[from..]
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-'))
        .map_or(buf.len(), |i| from + i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";

    #[test]
    fn chunked_scan_finds_the_same_lines_as_a_whole_scan() {
        let mut text = String::new();
        for i in 0..200 {
            text.push_str(&format!("line {i} "));
            if i % 17 == 3 {
                text.push_str(KEY);
            }
            text.push('\n');
        }
        let whole = scan::key_lines(text.as_bytes());
        assert!(!whole.is_empty());
        for chunk in [64, 100, 257, 4096] {
            assert_eq!(
                key_lines_in(text.as_bytes(), chunk).unwrap(),
                whole,
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn a_key_in_a_long_line_is_not_split_or_counted_twice() {
        // One line far longer than a chunk, keys at many offsets, words between them.
        let mut line = String::new();
        for i in 0..50 {
            line.push_str(&"word ".repeat(i % 7 + 3));
            line.push_str(KEY);
            line.push(' ');
        }
        let text = format!("first\n{line}\nlast {KEY}\n");
        let whole = scan::key_lines(text.as_bytes());
        assert_eq!(whole.len(), 51);
        assert_eq!(key_lines_in(text.as_bytes(), 80).unwrap(), whole);
    }

    #[test]
    fn a_large_file_is_scanned_in_bounded_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.log");
        let mut data = vec![b'x'; 3 * CHUNK_BYTES];
        for (i, b) in data.iter_mut().enumerate() {
            if i % 1000 == 999 {
                *b = b'\n';
            }
        }
        let at = 2 * CHUNK_BYTES + 10;
        data[at..at + KEY.len()].copy_from_slice(KEY.as_bytes());
        data[at - 1] = b' ';
        std::fs::write(&path, &data).unwrap();
        assert_eq!(
            key_lines_in_file(&path).unwrap(),
            scan::key_lines(&data),
            "same line numbers as one whole scan"
        );
    }
}
