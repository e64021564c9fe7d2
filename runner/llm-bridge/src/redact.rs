//! Streaming redaction of secrets (upstream keys, the trial token) from bytes that pass through
//! the bridge, for chunks of any size and secrets split across chunk boundaries.
//!
//! Only a tail that could be the start of a secret is held back between chunks, so a stream
//! to the agent is not delayed in the normal case where a chunk ends in ordinary text.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};

/// What a redacted secret is replaced with.
pub const REDACTED: &[u8] = b"[REDACTED]";

/// A set of secrets to cut out of byte streams. Cheap to share (`Arc`) between calls.
#[derive(Debug)]
pub struct Secrets {
    matcher: Option<AhoCorasick>,
    patterns: Vec<Vec<u8>>,
}

impl Secrets {
    /// Secrets to redact. Empty strings are ignored (they would match everywhere).
    pub fn new<I, S>(secrets: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut patterns: Vec<Vec<u8>> = secrets
            .into_iter()
            .map(|s| s.as_ref().to_vec())
            .filter(|s| !s.is_empty())
            .collect();
        patterns.sort();
        patterns.dedup();
        let matcher = (!patterns.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&patterns)
                .expect("literal patterns always build")
        });
        Secrets { matcher, patterns }
    }

    /// A redactor for one stream.
    pub fn stream(self: &Arc<Self>) -> Redactor {
        Redactor {
            secrets: self.clone(),
            pending: Vec::new(),
        }
    }

    /// Redacts a whole in-memory value (headers, error messages).
    pub fn redact_all(&self, bytes: &[u8]) -> Vec<u8> {
        match &self.matcher {
            Some(matcher) => matcher.replace_all_bytes(bytes, &vec![REDACTED; self.patterns.len()]),
            None => bytes.to_vec(),
        }
    }

    /// Redacts a string; invalid UTF-8 never arises since secrets and the marker are text.
    pub fn redact_str(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.redact_all(text.as_bytes())).into_owned()
    }

    /// The length of the longest suffix of `bytes` that is a proper prefix of a secret.
    fn held_back(&self, bytes: &[u8]) -> usize {
        let mut longest = 0;
        for pattern in &self.patterns {
            let max = (pattern.len() - 1).min(bytes.len());
            for len in (longest + 1..=max).rev() {
                if bytes[bytes.len() - len..] == pattern[..len] {
                    longest = len;
                    break;
                }
            }
        }
        longest
    }
}

/// Redacts one byte stream chunk by chunk.
#[derive(Debug)]
pub struct Redactor {
    secrets: Arc<Secrets>,
    /// Bytes held back because they may begin a secret that the next chunk completes.
    pending: Vec<u8>,
}

impl Redactor {
    /// Takes the next chunk; returns the bytes that are safe to pass on now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let secrets = self.secrets.clone();
        let Some(matcher) = &secrets.matcher else {
            return chunk.to_vec();
        };
        let mut buffer = std::mem::take(&mut self.pending);
        buffer.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(buffer.len());
        let mut position = 0;
        for found in matcher.find_iter(&buffer) {
            out.extend_from_slice(&buffer[position..found.start()]);
            out.extend_from_slice(REDACTED);
            position = found.end();
        }
        let rest = &buffer[position..];
        let hold = secrets.held_back(rest);
        out.extend_from_slice(&rest[..rest.len() - hold]);
        self.pending = rest[rest.len() - hold..].to_vec();
        out
    }

    /// Ends the stream: what was held back is not a secret after all.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact_in_chunks(secrets: &Arc<Secrets>, text: &str, chunk: usize) -> String {
        let mut redactor = secrets.stream();
        let mut out = Vec::new();
        for piece in text.as_bytes().chunks(chunk) {
            out.extend(redactor.push(piece));
        }
        out.extend(redactor.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn secrets_split_across_chunks_are_redacted() {
        let secrets = Arc::new(Secrets::new([
            "sk-upstream-0123456789",
            "runner-trial-abcdef",
            "",
        ]));
        let text = "a sk-upstream-0123456789 b runner-trial-abcdef c sk-upstream-01 d";
        for chunk in 1..text.len() + 1 {
            assert_eq!(
                redact_in_chunks(&secrets, text, chunk),
                "a [REDACTED] b [REDACTED] c sk-upstream-01 d",
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn ordinary_text_is_not_held_back() {
        let secrets = Arc::new(Secrets::new(["secret-value"]));
        let mut redactor = secrets.stream();
        assert_eq!(redactor.push(b"data: hello\n\n"), b"data: hello\n\n");
        assert_eq!(redactor.push(b"ends with secr"), b"ends with ");
        assert_eq!(redactor.push(b"et"), b"");
        assert_eq!(redactor.finish(), b"secret");
        assert_eq!(
            Secrets::new(Vec::<String>::new()).redact_str("anything"),
            "anything"
        );
        assert_eq!(secrets.redact_str("a secret-value b"), "a [REDACTED] b");
    }
}
