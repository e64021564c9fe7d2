//! The verifier's own removal of line breaks and terminal escape codes, written independently of
//! the scrubber's `flatten` so one bug cannot hide in both. It only needs the kept bytes.

/// Returns `input` without `\r`, `\n`, ANSI CSI/OSC sequences (raw `ESC`, or spelled `\u001b`,
/// `\x1b`, `\033`, `\e[`), JSON `\n`/`\r` escapes and backslash-newline continuations.
pub fn strip(input: &[u8]) -> Vec<u8> {
    let mut kept = Vec::with_capacity(input.len());
    let mut i = 0;
    let n = input.len();
    while i < n {
        let b = input[i];
        if b == b'\n' || b == b'\r' {
            i += 1;
        } else if b == 0x1b {
            i = after_escape(input, i + 1);
        } else if b == b'\\' && i + 1 < n {
            let rest = &input[i + 1..];
            if rest[0] == b'\\' {
                kept.extend_from_slice(b"\\\\");
                i += 2;
            } else if matches!(rest[0], b'n' | b'r' | b'\n') {
                i += 2;
            } else if rest.starts_with(b"u001b") || rest.starts_with(b"u001B") {
                i = after_escape(input, i + 6);
            } else if rest.starts_with(b"x1b")
                || rest.starts_with(b"x1B")
                || rest.starts_with(b"033")
            {
                i = after_escape(input, i + 4);
            } else if rest.starts_with(b"e[") {
                i = after_escape(input, i + 2);
            } else {
                kept.push(b);
                i += 1;
            }
        } else {
            // Copy the run up to the next byte that may start a break or escape in one go.
            let run = input[i..]
                .iter()
                .position(|&c| matches!(c, b'\n' | b'\r' | 0x1b | b'\\'))
                .unwrap_or(n - i);
            kept.extend_from_slice(&input[i..i + run.max(1)]);
            i += run.max(1);
        }
    }
    kept
}

/// Position after the escape sequence whose introducer ended just before `at`.
fn after_escape(input: &[u8], at: usize) -> usize {
    match input.get(at) {
        Some(b'[') => {
            let mut j = at + 1;
            while j < input.len() && j <= at + 32 {
                match input[j] {
                    0x40..=0x7e => return j + 1,
                    0x20..=0x3f => j += 1,
                    _ => break,
                }
            }
            at + 1
        }
        Some(b']') => {
            let end = input.len().min(at + 513);
            let mut j = at + 1;
            while j < end {
                if input[j] == 0x07 {
                    return j + 1;
                }
                if input[j] == 0x1b && input.get(j + 1) == Some(&b'\\') {
                    return j + 2;
                }
                j += 1;
            }
            at + 1
        }
        Some(&b) if (0x20..0x7f).contains(&b) => at + 1,
        _ => at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_breaks_and_escapes() {
        assert_eq!(
            strip(b"ab\r\ncd\x1b[1;31mef\\u001b[0mgh\\nij\x1b]0;t\x07kl"),
            b"abcdefghijkl"
        );
        assert_eq!(strip(b"C:\\\\new"), b"C:\\\\new");
        assert_eq!(strip(b"plain"), b"plain");
    }
}
