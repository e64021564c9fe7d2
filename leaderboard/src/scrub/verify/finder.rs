//! The verifier's literal search, deliberately unlike the scrubber's Aho-Corasick automaton: a
//! hashed bitset of 4-byte windows of every needle is probed at a fixed stride of the haystack, and
//! candidates are confirmed by direct comparison. Needles shorter than 8 bytes use `memmem`.

use std::collections::HashMap;

use memchr::memmem;

/// Width of the probed window.
const K: usize = 4;
/// log2 of the bitset size (4 Mi bits = 512 KiB, small enough to stay in cache).
const BITS_LOG2: u32 = 22;
/// Needles shorter than this go to `memmem`; longer ones allow probing every `stride` bytes.
const MIN_INDEXED: usize = 8;

/// A multi-needle finder over a fixed needle list. Every needle of length `L >= MIN_INDEXED` has
/// its K-byte windows at offsets `0..stride` indexed, where `stride = min L - K + 1`. Probing the
/// haystack every `stride` bytes then lands inside each occurrence at one indexed offset.
pub struct Finder {
    needles: Vec<Vec<u8>>,
    bits: Vec<u64>,
    by_window: HashMap<u32, Vec<(usize, usize)>>,
    short: Vec<(usize, memmem::Finder<'static>)>,
    stride: usize,
}

fn slot(window: u32) -> usize {
    (u64::from(window).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BITS_LOG2)) as usize
}

fn window_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + K].try_into().expect("K bytes"))
}

impl Finder {
    /// Indexes `needles`; the index of a needle in this list is what [`Finder::each_hit`] reports.
    pub fn new(needles: Vec<Vec<u8>>) -> Self {
        let mut bits = vec![0u64; 1 << (BITS_LOG2 - 6)];
        let mut by_window: HashMap<u32, Vec<(usize, usize)>> = HashMap::new();
        let mut short = Vec::new();
        let min_len = needles
            .iter()
            .map(Vec::len)
            .filter(|&l| l >= MIN_INDEXED)
            .min()
            .unwrap_or(MIN_INDEXED);
        let stride = (min_len - K + 1).min(16);
        for (index, needle) in needles.iter().enumerate() {
            if needle.is_empty() {
                continue;
            }
            if needle.len() < MIN_INDEXED {
                short.push((index, memmem::Finder::new(needle).into_owned()));
                continue;
            }
            for offset in 0..stride {
                let window = window_at(needle, offset);
                let s = slot(window);
                bits[s >> 6] |= 1 << (s & 63);
                by_window.entry(window).or_default().push((index, offset));
            }
        }
        Finder {
            needles,
            bits,
            by_window,
            short,
            stride,
        }
    }

    /// Calls `hit(needle index, offset)` for every occurrence (overlapping ones included; an
    /// occurrence may be reported more than once).
    pub fn each_hit(&self, haystack: &[u8], mut hit: impl FnMut(usize, usize)) {
        if haystack.len() >= K {
            for at in (0..=haystack.len() - K).step_by(self.stride) {
                let window = window_at(haystack, at);
                let s = slot(window);
                if self.bits[s >> 6] & (1 << (s & 63)) == 0 {
                    continue;
                }
                let Some(candidates) = self.by_window.get(&window) else {
                    continue;
                };
                for &(index, offset) in candidates {
                    let Some(start) = at.checked_sub(offset) else {
                        continue;
                    };
                    if haystack[start..].starts_with(&self.needles[index]) {
                        hit(index, start);
                    }
                }
            }
        }
        for (index, finder) in &self.short {
            for at in finder.find_iter(haystack) {
                hit(*index, at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_long_short_and_overlapping_needles() {
        let finder = Finder::new(vec![
            b"abcdefghijklm".to_vec(),
            b"xyz".to_vec(),
            b"cdefghijklmno".to_vec(),
        ]);
        // Every placement, so each stride phase is exercised.
        for pad in 0..20 {
            let hay = [".".repeat(pad).as_bytes(), b"abcdefghijklmno..xyz"].concat();
            let mut hits = Vec::new();
            finder.each_hit(&hay, |i, at| hits.push((i, at)));
            hits.sort();
            hits.dedup();
            assert_eq!(hits, [(0, pad), (1, pad + 17), (2, pad + 2)], "pad {pad}");
        }
        let mut none = 0;
        finder.each_hit(b"abcdefghijkl", |_, _| none += 1);
        assert_eq!(none, 0);
    }
}
