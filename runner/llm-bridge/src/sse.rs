//! A bounded server-sent-events framer: turns a byte stream into the `data` payloads of its
//! events, without keeping more than one event (up to a cap) in memory.
//!
//! Lines end in `\n` or `\r\n` (what OpenAI and Anthropic send; a lone `\r` line ending, which
//! the SSE spec also allows, is not used by either and is not handled). Multi-line `data` fields
//! are joined with `\n` as the spec says. An event larger than the cap is skipped whole, which
//! for metering means "usage unknown", never a wrong number.

/// Incremental SSE framer with a per-event size cap.
#[derive(Debug)]
pub struct SseEvents {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    max_event: usize,
    /// Set when the current event outgrew the cap: drop everything until the blank line.
    skipping: bool,
}

impl SseEvents {
    /// A framer that skips events whose lines add up to more than `max_event` bytes.
    pub fn new(max_event: usize) -> SseEvents {
        SseEvents {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            max_event,
            skipping: false,
        }
    }

    /// Feeds bytes; calls `on_event` with the data of every event they complete.
    pub fn feed(&mut self, mut bytes: &[u8], mut on_event: impl FnMut(&[u8])) {
        while !bytes.is_empty() {
            match memchr_newline(bytes) {
                Some(end) => {
                    self.push_line_bytes(&bytes[..end]);
                    bytes = &bytes[end + 1..];
                    self.end_line(&mut on_event);
                }
                None => {
                    self.push_line_bytes(bytes);
                    bytes = &[];
                }
            }
        }
    }

    /// Ends the stream: a last event without its trailing blank line still counts.
    pub fn finish(&mut self, mut on_event: impl FnMut(&[u8])) {
        if !self.line.is_empty() {
            self.end_line(&mut on_event);
        }
        self.dispatch(&mut on_event);
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        if self.line.len() + self.data.len() + bytes.len() > self.max_event {
            self.skipping = true;
            self.line.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, on_event: &mut impl FnMut(&[u8])) {
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        if self.line.is_empty() {
            if self.skipping {
                self.skipping = false;
            } else {
                self.dispatch(on_event);
            }
            return;
        }
        if !self.skipping
            && let Some(rest) = self.line.strip_prefix(b"data:")
        {
            let value = rest.strip_prefix(b" ").unwrap_or(rest);
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        // `event:`, `id:`, `retry:` and `:comment` lines carry nothing metering needs.
        self.line.clear();
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(&[u8])) {
        if self.has_data {
            on_event(&self.data);
        }
        self.data.clear();
        self.has_data = false;
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(input: &[&[u8]], cap: usize) -> Vec<String> {
        let mut framer = SseEvents::new(cap);
        let mut out = Vec::new();
        for piece in input {
            framer.feed(piece, |d| out.push(String::from_utf8_lossy(d).into_owned()));
        }
        framer.finish(|d| out.push(String::from_utf8_lossy(d).into_owned()));
        out
    }

    #[test]
    fn frames_events_across_chunks_and_line_endings() {
        let got = events(
            &[
                b"event: a\nda",
                b"ta: one\n\n: comment\n\ndata:two\r\ndata: lines\r\n\r\n",
                b"data: last",
            ],
            1024,
        );
        assert_eq!(got, vec!["one", "two\nlines", "last"]);
    }

    #[test]
    fn oversized_events_are_skipped_and_the_next_one_still_arrives() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        let got = events(&[big.as_bytes(), b"data: small\n\n"], 32);
        assert_eq!(got, vec!["small"]);
    }
}
