//! File classification by magic bytes (never by extension): what the scrubber can rewrite.

/// What a blob of bytes is, as far as scrubbing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// gzip stream (possibly several members): decompressed, scrubbed, recompressed.
    Gzip,
    /// POSIX/GNU tar: members scrubbed and the archive rebuilt.
    Tar,
    /// UTF-8 text without NUL bytes: markers replace values.
    Text,
    /// Anything else readable as bytes: same-length filler replaces values.
    Binary,
    /// A compressed or encrypted container we cannot look into; the reason names the format.
    Unscannable(&'static str),
}

/// Classifies `bytes` by their leading magic numbers and content.
pub fn classify(bytes: &[u8]) -> Kind {
    const OPAQUE: &[(&[u8], &str)] = &[
        (b"PK\x03\x04", "zip archive"),
        (b"PK\x05\x06", "zip archive"),
        (b"PK\x07\x08", "zip archive"),
        (b"7z\xbc\xaf\x27\x1c", "7z archive"),
        (b"Rar!\x1a\x07", "rar archive"),
        (b"\xfd7zXZ\x00", "xz stream"),
        (b"\x28\xb5\x2f\xfd", "zstd stream"),
        (b"\x04\x22\x4d\x18", "lz4 frame"),
        (b"\x5d\x00\x00", "lzma stream"),
        (b"-----BEGIN PGP MESSAGE", "PGP-encrypted data"),
        (b"age-encryption.org/", "age-encrypted data"),
        (b"Salted__", "openssl-encrypted data"),
    ];
    if bytes.starts_with(b"\x1f\x8b") {
        return Kind::Gzip;
    }
    if bytes.len() >= 10
        && bytes.starts_with(b"BZh")
        && bytes[3].is_ascii_digit()
        && &bytes[4..10] == b"1AY&SY"
    {
        return Kind::Unscannable("bzip2 stream");
    }
    if let Some((_, what)) = OPAQUE.iter().find(|(magic, _)| bytes.starts_with(magic)) {
        return Kind::Unscannable(what);
    }
    if bytes.len() >= 512 && &bytes[257..262] == b"ustar" {
        return Kind::Tar;
    }
    if memchr::memchr(0, bytes).is_none() && std::str::from_utf8(bytes).is_ok() {
        Kind::Text
    } else {
        Kind::Binary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_by_magic() {
        assert_eq!(classify(b"\x1f\x8b\x08rest"), Kind::Gzip);
        assert_eq!(
            classify(b"PK\x03\x04...."),
            Kind::Unscannable("zip archive")
        );
        assert_eq!(
            classify(b"7z\xbc\xaf\x27\x1c..."),
            Kind::Unscannable("7z archive")
        );
        assert_eq!(
            classify(b"Rar!\x1a\x07\x00"),
            Kind::Unscannable("rar archive")
        );
        assert_eq!(classify("plain text ü\n".as_bytes()), Kind::Text);
        assert_eq!(classify(b""), Kind::Text);
        assert_eq!(classify(b"BZh is a word in text"), Kind::Text);
        assert_eq!(classify(b"a\0b"), Kind::Binary);
        assert_eq!(classify(b"\xff\xfe"), Kind::Binary);
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(classify(&tar), Kind::Tar);
    }
}
