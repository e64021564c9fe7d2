//! The scrubber's matcher: one Aho-Corasick automaton over every needle, replacing matches with
//! `[REDACTED:NAME]` in text and with same-length filler in binary data.

use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use super::error::ScrubError;
use super::flatten::{flatten, flatten_needle};
use super::forms::{Form, Needle, expand};
use super::secrets::SecretSet;

/// One kind of redaction: which secret, in which form, and whether it was split across lines or
/// escape codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hit {
    /// Index into the secret list.
    pub secret: usize,
    /// The form found.
    pub form: Form,
    /// True when line breaks or ANSI codes sat inside the occurrence.
    pub split: bool,
}

/// Redaction counts per kind.
pub type Tally = BTreeMap<Hit, u64>;

/// The compiled needles of a secret set.
pub struct Matcher {
    needles: Vec<Needle>,
    names: Vec<String>,
    raw: AhoCorasick,
    flat: AhoCorasick,
    /// Needle index of each pattern of `flat`.
    flat_ids: Vec<usize>,
    markers: Vec<Vec<u8>>,
    filler: u8,
}

fn automaton(patterns: &[Vec<u8>]) -> AhoCorasick {
    // Leftmost-longest, so a secret that contains another secret is replaced whole.
    // A full DFA: a few MB for hundreds of needles, and roughly twice the NFA's throughput.
    AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostLongest)
        .kind(Some(AhoCorasickKind::DFA))
        .build(patterns)
        .expect("needles compile")
}

impl Matcher {
    /// Compiles every form of every secret, except `disabled` forms (a test hook).
    pub fn new(secrets: &SecretSet, disabled: &[Form]) -> Result<Self, ScrubError> {
        let needles = expand(&secrets.secrets, disabled);
        let raw = automaton(&needles.iter().map(|n| n.bytes.clone()).collect::<Vec<_>>());
        let mut flat_patterns = Vec::new();
        let mut flat_ids = Vec::new();
        for (index, needle) in needles.iter().enumerate() {
            let flat = flatten_needle(&needle.bytes);
            if !flat.is_empty() {
                flat_patterns.push(flat);
                flat_ids.push(index);
            }
        }
        let flat = automaton(&flat_patterns);
        let names: Vec<String> = secrets.secrets.iter().map(|s| s.name.clone()).collect();
        let mut matcher = Matcher {
            needles,
            names,
            raw,
            flat,
            flat_ids,
            markers: Vec::new(),
            filler: b'X',
        };
        matcher.markers = (0..matcher.names.len())
            .map(|i| matcher.safe_marker(i))
            .collect::<Result<_, _>>()?;
        matcher.filler = [b'X', b'*', b'#', b'0']
            .into_iter()
            .find(|&f| {
                !matcher
                    .needles
                    .iter()
                    .any(|n| n.bytes.iter().all(|&b| b == f))
            })
            .ok_or(ScrubError::NoSafeMarker)?;
        Ok(matcher)
    }

    /// The needles, indexed as in [`Hit`]s.
    pub fn needles(&self) -> &[Needle] {
        &self.needles
    }

    /// Secret names, indexed as in [`Hit::secret`].
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// True when `bytes` holds any needle, contiguous or split.
    fn contains_any(&self, bytes: &[u8]) -> bool {
        self.raw.is_match(bytes) || self.flat.is_match(&flatten_needle(bytes))
    }

    /// `[REDACTED:NAME]`, unless the name would itself spell a secret form or a provider-key
    /// shape; then a numbered marker.
    fn safe_marker(&self, secret: usize) -> Result<Vec<u8>, ScrubError> {
        let candidates = [
            format!("[REDACTED:{}]", self.names[secret]),
            format!("[REDACTED:SECRET_{}]", secret + 1),
            "[REDACTED]".to_string(),
        ];
        candidates
            .into_iter()
            .find(|c| !self.contains_any(c.as_bytes()) && !::secrets::looks_like_provider_key(c))
            .map(String::into_bytes)
            .ok_or(ScrubError::NoSafeMarker)
    }

    /// Replaces every occurrence in text: first contiguous ones, then ones split by line breaks
    /// or ANSI codes (the first piece becomes the marker, later pieces vanish, the breaks stay).
    /// Two passes because an escape sequence next to a value can swallow its first byte in the
    /// flattened view. `None` when nothing matched.
    pub fn redact_text(&self, input: &[u8], tally: &mut Tally) -> Option<Vec<u8>> {
        let first = flatten(input);
        // Without escape sequences the flattened pass alone sees every contiguous occurrence.
        let (contiguous, flat) = match first {
            None => return self.replace_contiguous(input, tally),
            Some(flat) if !flat.multi_byte_gaps => (None, flat),
            Some(flat) => match self.replace_contiguous(input, tally) {
                None => (None, flat),
                Some(replaced) => match flatten(&replaced) {
                    Some(flat) => (Some(replaced), flat),
                    None => return Some(replaced),
                },
            },
        };
        let text = contiguous.as_deref().unwrap_or(input);
        let mut out: Option<Vec<u8>> = None;
        let mut copied = 0;
        for m in self.flat.find_iter(&flat.bytes) {
            let needle = &self.needles[self.flat_ids[m.pattern().as_usize()]];
            let ranges = flat.original_ranges(m.start(), m.end());
            let out = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
            for (piece, &(start, end)) in ranges.iter().enumerate() {
                out.extend_from_slice(&text[copied..start]);
                if piece == 0 {
                    out.extend_from_slice(&self.markers[needle.secret]);
                }
                copied = end;
            }
            let hit = Hit {
                secret: needle.secret,
                form: needle.form,
                split: ranges.len() > 1,
            };
            *tally.entry(hit).or_default() += 1;
        }
        match out {
            Some(mut out) => {
                out.extend_from_slice(&text[copied..]);
                Some(out)
            }
            None => contiguous,
        }
    }

    /// Replaces contiguous occurrences with markers; `None` when there are none.
    fn replace_contiguous(&self, input: &[u8], tally: &mut Tally) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        let mut copied = 0;
        for m in self.raw.find_iter(input) {
            let needle = &self.needles[m.pattern().as_usize()];
            let out = out.get_or_insert_with(|| Vec::with_capacity(input.len()));
            out.extend_from_slice(&input[copied..m.start()]);
            out.extend_from_slice(&self.markers[needle.secret]);
            copied = m.end();
            let hit = Hit {
                secret: needle.secret,
                form: needle.form,
                split: false,
            };
            *tally.entry(hit).or_default() += 1;
        }
        let mut out = out?;
        out.extend_from_slice(&input[copied..]);
        Some(out)
    }

    /// Overwrites every contiguous occurrence with same-length filler, so offsets stay valid.
    /// `None` when nothing matched.
    pub fn redact_binary(&self, input: &[u8], tally: &mut Tally) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        for m in self.raw.find_iter(input) {
            let needle = &self.needles[m.pattern().as_usize()];
            let out = out.get_or_insert_with(|| input.to_vec());
            out[m.start()..m.end()].fill(self.filler);
            *tally
                .entry(Hit {
                    secret: needle.secret,
                    form: needle.form,
                    split: false,
                })
                .or_default() += 1;
        }
        out
    }

    /// A path safe to print: known values redacted and provider-key shapes masked, for reports
    /// about leftovers whose names the scrubber failed to clean.
    pub fn printable_path(&self, path: &str) -> String {
        let mut tally = Tally::new();
        let redacted = self.redact_text(path.as_bytes(), &mut tally);
        let text =
            String::from_utf8_lossy(redacted.as_deref().unwrap_or(path.as_bytes())).into_owned();
        ::secrets::provider_key_pattern()
            .replace_all(&text, "[REDACTED:UNKNOWN_KEY]")
            .into_owned()
    }

    /// True when raw bytes contain any needle contiguously (used for container headers).
    pub fn raw_match(&self, input: &[u8]) -> bool {
        self.raw.is_match(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrub::secrets::SecretSetBuilder;

    fn matcher(pairs: &[&str]) -> Matcher {
        let mut b = SecretSetBuilder::new(false);
        for (i, p) in pairs.iter().enumerate() {
            b.add_pair("--secret", i + 1, p).unwrap();
        }
        Matcher::new(&b.build().unwrap(), &[]).unwrap()
    }

    #[test]
    fn redacts_text_including_split_values() {
        let m = matcher(&["TOKEN=abcdefghijklmnop"]);
        let mut tally = Tally::new();
        let out = m
            .redact_text(
                b"x=abcdefghijklmnop; y=abcdefgh\x1b[0mijkl\nmnop!",
                &mut tally,
            )
            .unwrap();
        assert_eq!(out, b"x=[REDACTED:TOKEN]; y=[REDACTED:TOKEN]\x1b[0m\n!");
        assert_eq!(tally.values().sum::<u64>(), 2);
        assert!(tally.keys().any(|h| h.split));
        assert!(m.redact_text(b"nothing to see", &mut tally).is_none());
    }

    #[test]
    fn finds_values_next_to_escape_sequences() {
        // `ESC [ 3` then ` s` reads as one CSI sequence in the flattened view; the raw pass
        // must still see the contiguous value.
        let m = matcher(&["TOKEN=sk-abcdefghijklmnop"]);
        let mut tally = Tally::new();
        let out = m
            .redact_text(b"\x1b[3 sk-abcdefghijklmnop 2m", &mut tally)
            .unwrap();
        assert_eq!(out, b"\x1b[3 [REDACTED:TOKEN] 2m");
    }

    #[test]
    fn printable_paths_hide_values_and_key_shapes() {
        let m = matcher(&["TOKEN=abcdefghijklmnop"]);
        let shown =
            m.printable_path("d/abcdefghijklmnop/ghp_ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210.txt");
        assert_eq!(shown, "d/[REDACTED:TOKEN]/[REDACTED:UNKNOWN_KEY].txt");
    }

    #[test]
    fn binary_keeps_length() {
        let m = matcher(&["TOKEN=abcdefghijklmnop"]);
        let mut tally = Tally::new();
        let input = b"\0\x01abcdefghijklmnop\0";
        let out = m.redact_binary(input, &mut tally).unwrap();
        assert_eq!(out.len(), input.len());
        assert_eq!(&out[2..18], b"XXXXXXXXXXXXXXXX");
    }

    #[test]
    fn marker_never_spells_a_secret() {
        // The name of one secret is the value of another, and another name is key-shaped.
        let m = matcher(&[
            "LONG_NAME_VALUE=another-secret",
            "X=LONG_NAME_VALUE",
            "AKIAABCDEFGHIJKLMNOP=zzzzzzzzzz",
        ]);
        for marker in &m.markers {
            assert!(!m.contains_any(marker));
            assert!(!::secrets::looks_like_provider_key(
                std::str::from_utf8(marker).unwrap()
            ));
        }
        assert_eq!(m.markers[0], b"[REDACTED:SECRET_1]");
        assert_eq!(m.markers[2], b"[REDACTED:SECRET_3]");
    }
}
