//! The scrubber's "flattened" view of text: line breaks and ANSI escape sequences (raw, or
//! written out as `\n`, `\u001b[…m` inside JSON) removed, with a map back to original offsets.
//! A value that a terminal log wrapped or coloured mid-way is contiguous in this view.

/// Longest CSI sequence (`ESC [ params final`) we treat as one gap.
const MAX_CSI: usize = 32;
/// Longest OSC sequence (`ESC ] … BEL`) we treat as one gap.
const MAX_OSC: usize = 512;

/// A flattened copy and the segments of the original it is made of.
pub struct Flat {
    /// The kept bytes, concatenated.
    pub bytes: Vec<u8>,
    /// `(original offset, flattened offset, length)` of each kept run, in order.
    segments: Vec<(usize, usize, usize)>,
    /// True when a removed unit was longer than one byte (an escape sequence). Removing single
    /// `\n`/`\r` bytes is context-free, so every contiguous needle still matches its flattened
    /// form; multi-byte units can swallow a needle's edge, so callers must also search raw.
    pub multi_byte_gaps: bool,
}

/// Byte that may start a gap; everything else is copied in bulk.
fn may_start_gap(b: u8) -> bool {
    matches!(b, b'\n' | b'\r' | 0x1b | b'\\')
}

/// Flattens `input`, or returns `None` when there is nothing to remove.
pub fn flatten(input: &[u8]) -> Option<Flat> {
    let mut bytes = Vec::new();
    let mut segments = Vec::new();
    let mut run_start = 0;
    let mut multi_byte_gaps = false;
    let mut i = 0;
    while i < input.len() {
        let Some(offset) = input[i..].iter().position(|&b| may_start_gap(b)) else {
            break;
        };
        i += offset;
        let gap = gap_len(input, i);
        if gap == 0 {
            // An escaped backslash `\\` is skipped whole so its second half never starts a gap.
            i += if input[i] == b'\\' && input.get(i + 1) == Some(&b'\\') {
                2
            } else {
                1
            };
            continue;
        }
        if i > run_start {
            segments.push((run_start, bytes.len(), i - run_start));
            bytes.extend_from_slice(&input[run_start..i]);
        }
        multi_byte_gaps |= gap > 1;
        i += gap;
        run_start = i;
    }
    if segments.is_empty() && run_start == 0 {
        return None;
    }
    if run_start < input.len() {
        segments.push((run_start, bytes.len(), input.len() - run_start));
        bytes.extend_from_slice(&input[run_start..]);
    }
    Some(Flat {
        bytes,
        segments,
        multi_byte_gaps,
    })
}

/// Flattens a needle the same way as text, so needles holding gap bytes still match.
pub fn flatten_needle(needle: &[u8]) -> Vec<u8> {
    flatten(needle)
        .map(|f| f.bytes)
        .unwrap_or_else(|| needle.to_vec())
}

impl Flat {
    /// The original byte ranges making up flattened range `start..end`, in order.
    pub fn original_ranges(&self, start: usize, end: usize) -> Vec<(usize, usize)> {
        let first = self
            .segments
            .partition_point(|&(_, flat, len)| flat + len <= start);
        let mut out = Vec::new();
        for &(orig, flat, len) in &self.segments[first..] {
            if flat >= end {
                break;
            }
            let from = start.max(flat);
            let to = end.min(flat + len);
            out.push((orig + from - flat, orig + to - flat));
        }
        out
    }
}

/// Length of the gap starting at `i`, or 0 when `input[i]` starts no gap.
fn gap_len(input: &[u8], i: usize) -> usize {
    match input[i] {
        b'\n' | b'\r' => 1,
        0x1b => 1 + sequence_len(input, i + 1),
        b'\\' => match input.get(i + 1) {
            Some(b'n' | b'r' | b'\n') => 2,
            Some(b'u') if matches!(input.get(i + 2..i + 6), Some(b"001b" | b"001B")) => {
                6 + sequence_len(input, i + 6)
            }
            Some(b'x') if matches!(input.get(i + 2..i + 4), Some(b"1b" | b"1B")) => {
                4 + sequence_len(input, i + 4)
            }
            Some(b'0') if input.get(i + 2..i + 4) == Some(b"33") => 4 + sequence_len(input, i + 4),
            Some(b'e') if input.get(i + 2) == Some(&b'[') => 2 + sequence_len(input, i + 2),
            _ => 0,
        },
        _ => 0,
    }
}

/// Length of the escape-sequence body after an ESC at `i` (CSI, OSC, or one byte).
fn sequence_len(input: &[u8], i: usize) -> usize {
    match input.get(i) {
        Some(b'[') => {
            // Parameters and intermediates are 0x20..=0x3F; the final byte is 0x40..=0x7E.
            for (n, &b) in input[i + 1..].iter().take(MAX_CSI).enumerate() {
                match b {
                    0x20..=0x3f => continue,
                    0x40..=0x7e => return n + 2,
                    _ => return 1,
                }
            }
            1
        }
        Some(b']') => {
            for (n, &b) in input[i + 1..].iter().take(MAX_OSC).enumerate() {
                if b == 0x07 {
                    return n + 2;
                }
                if b == 0x1b && input.get(i + 1 + n + 1) == Some(&b'\\') {
                    return n + 3;
                }
            }
            1
        }
        Some(b) if (0x20..0x7f).contains(b) => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_breaks_and_escapes_and_maps_back() {
        let input = b"ab\ncd\x1b[31;1mef\\u001b[0mgh\\nij\r\nkl";
        let flat = flatten(input).unwrap();
        assert_eq!(flat.bytes, b"abcdefghijkl");
        let ranges = flat.original_ranges(1, 5);
        let pieces: Vec<&[u8]> = ranges.iter().map(|&(s, e)| &input[s..e]).collect();
        assert_eq!(pieces, [&b"b"[..], b"cd", b"e"]);
    }

    #[test]
    fn leaves_plain_text_and_escaped_backslashes_alone() {
        assert!(flatten(b"no gaps here").is_none());
        assert!(flatten(b"C:\\\\new path").is_none());
        let osc = flatten(b"a\x1b]0;title\x07b").unwrap();
        assert_eq!(osc.bytes, b"ab");
    }
}
