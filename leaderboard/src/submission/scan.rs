//! Finding provider-key-shaped strings in files, by line, without ever keeping the value.

use super::Rule;
use super::report::Violation;

/// 1-based line numbers of provider-key-shaped strings in `bytes`, one entry per match. The
/// pattern works on bytes, so binary and non-UTF-8 files are scanned too.
pub fn key_lines(bytes: &[u8]) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut line = 1;
    let mut counted_to = 0;
    for m in ::secrets::provider_key_bytes_pattern().find_iter(bytes) {
        line += memchr::memchr_iter(b'\n', &bytes[counted_to..m.start()]).count();
        counted_to = m.start();
        lines.push(line);
    }
    lines
}

/// A `no_provider_keys` violation in `file` (as displayed) at each of `lines`.
pub fn violations_at_lines(
    lines: impl IntoIterator<Item = usize>,
    file: &str,
) -> impl Iterator<Item = Violation> {
    let file = file.to_owned();
    lines.into_iter().map(move |line| Violation {
        rule: Rule::NoProviderKeys,
        file: Some(file.clone()),
        line: Some(line),
        message: "a string shaped like a provider API key; remove or redact it (`runner scrub`) \
                  and rotate the key"
            .to_owned(),
        not_recorded: false,
    })
}

#[cfg(test)]
mod tests {
    use super::key_lines;

    #[test]
    fn reports_lines_of_each_key() {
        let text = b"ok\nkey sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345\nfine\n\xff hf_abcdefghijklmnopqrstuvwxyzABCDEF\n";
        assert_eq!(key_lines(text), [2, 4]);
        assert!(key_lines(b"sk-learn and the risk-free rate").is_empty());
    }
}
