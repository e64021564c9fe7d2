//! The verifier's literal search, deliberately unlike the scrubber's Aho-Corasick automaton: a
//! hashed bitset of every needle's first 8 bytes is probed at each position of the haystack, and
//! candidates are confirmed by direct comparison. Needles shorter than 8 bytes use `memmem`.

use std::collections::HashMap;

use memchr::memmem;

/// Width of the probed prefix.
const K: usize = 8;
/// log2 of the bitset size (4 Mi bits = 512 KiB, small enough to stay in cache).
const BITS_LOG2: u32 = 22;

/// A multi-needle finder over a fixed needle list.
pub struct Finder {
    needles: Vec<Vec<u8>>,
    bits: Vec<u64>,
    by_prefix: HashMap<u64, Vec<usize>>,
    short: Vec<(usize, memmem::Finder<'static>)>,
}

fn slot(prefix: u64) -> usize {
    (prefix.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BITS_LOG2)) as usize
}

fn prefix_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + K].try_into().expect("K bytes"))
}

impl Finder {
    /// Indexes `needles`; the index of a needle in this list is what [`Finder::each_hit`] reports.
    pub fn new(needles: Vec<Vec<u8>>) -> Self {
        let mut bits = vec![0u64; 1 << (BITS_LOG2 - 6)];
        let mut by_prefix: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut short = Vec::new();
        for (index, needle) in needles.iter().enumerate() {
            if needle.is_empty() {
                continue;
            }
            if needle.len() < K {
                short.push((index, memmem::Finder::new(needle).into_owned()));
                continue;
            }
            let prefix = prefix_at(needle, 0);
            let s = slot(prefix);
            bits[s >> 6] |= 1 << (s & 63);
            by_prefix.entry(prefix).or_default().push(index);
        }
        Finder {
            needles,
            bits,
            by_prefix,
            short,
        }
    }

    /// Calls `hit(needle index, offset)` for every occurrence (overlapping ones included).
    pub fn each_hit(&self, haystack: &[u8], mut hit: impl FnMut(usize, usize)) {
        if haystack.len() >= K {
            for at in 0..=haystack.len() - K {
                let prefix = prefix_at(haystack, at);
                let s = slot(prefix);
                if self.bits[s >> 6] & (1 << (s & 63)) == 0 {
                    continue;
                }
                let Some(candidates) = self.by_prefix.get(&prefix) else {
                    continue;
                };
                for &index in candidates {
                    if haystack[at..].starts_with(&self.needles[index]) {
                        hit(index, at);
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
            b"abcdefghij".to_vec(),
            b"xyz".to_vec(),
            b"cdefghijkl".to_vec(),
        ]);
        let mut hits = Vec::new();
        finder.each_hit(b"..abcdefghijkl..xyz", |i, at| hits.push((i, at)));
        hits.sort();
        assert_eq!(hits, [(0, 2), (1, 16), (2, 4)]);
        let mut none = 0;
        finder.each_hit(b"abcdefghi", |_, _| none += 1);
        assert_eq!(none, 0);
    }
}
