//! Finding provider-key-shaped strings in files, by line, without ever keeping the value.

use std::sync::LazyLock;

/// The provider key pattern over bytes, so binary and non-UTF-8 files are scanned too.
static KEY: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::Regex::new(tasks::secrets::provider_key_pattern().as_str())
        .expect("the shared pattern compiles")
});

/// 1-based line numbers of provider-key-shaped strings in `bytes`, one entry per match.
pub fn key_lines(bytes: &[u8]) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut line = 1;
    let mut counted_to = 0;
    for m in KEY.find_iter(bytes) {
        line += memchr::memchr_iter(b'\n', &bytes[counted_to..m.start()]).count();
        counted_to = m.start();
        lines.push(line);
    }
    lines
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
