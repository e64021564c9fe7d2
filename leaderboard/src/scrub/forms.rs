//! The encoded forms a secret value can take in a job directory, and the literal needles for each.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use serde::Serialize;

use super::secrets::Secret;

/// One way a value can be written down. Base64 forms carry the alignment (0, 1 or 2 bytes of
/// preceding data), because base64 of a longer string contains a different "core" per alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Form {
    /// The value as is.
    Raw,
    /// JSON string escaping (`\"`, `\\`, `\n`…).
    JsonEscaped,
    /// JSON escaping with `/` written as `\/`.
    JsonEscapedSlash,
    /// JSON escaping with non-ASCII as `\uXXXX` (Python's `ensure_ascii`).
    JsonEscapedAscii,
    /// Percent-encoding with upper-case hex.
    UrlEncoded,
    /// Percent-encoding with lower-case hex.
    UrlEncodedLower,
    /// `application/x-www-form-urlencoded` (space as `+`).
    FormEncoded,
    /// Standard base64 at the given alignment.
    Base64Std(u8),
    /// URL-safe base64 at the given alignment.
    Base64Url(u8),
    /// Lower-case hex.
    HexLower,
    /// Upper-case hex.
    HexUpper,
    /// First 4 and last 3 characters around `****` (as Harbor masks).
    Masked4x3,
    /// First 4 and last 4 characters around `****`.
    Masked4x4,
}

impl Form {
    /// Stable report label, e.g. `base64-url-1` or `masked-4-3`.
    pub fn label(self) -> String {
        match self {
            Form::Raw => "raw".into(),
            Form::JsonEscaped => "json-escaped".into(),
            Form::JsonEscapedSlash => "json-escaped-slash".into(),
            Form::JsonEscapedAscii => "json-escaped-ascii".into(),
            Form::UrlEncoded => "url-encoded".into(),
            Form::UrlEncodedLower => "url-encoded-lower".into(),
            Form::FormEncoded => "form-encoded".into(),
            Form::Base64Std(a) => format!("base64-std-{a}"),
            Form::Base64Url(a) => format!("base64-url-{a}"),
            Form::HexLower => "hex-lower".into(),
            Form::HexUpper => "hex-upper".into(),
            Form::Masked4x3 => "masked-4-3".into(),
            Form::Masked4x4 => "masked-4-4".into(),
        }
    }
}

impl Serialize for Form {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.label())
    }
}

/// A literal byte string to find, with the secret (index) and form it stands for.
#[derive(Clone)]
pub struct Needle {
    /// The bytes to find.
    pub bytes: Vec<u8>,
    /// Index into the secret list.
    pub secret: usize,
    /// Which form these bytes are.
    pub form: Form,
}

/// Shortest base64 core worth searching for; shorter cores only exist for `--allow-short` values.
const MIN_CORE: usize = 4;

/// All distinct needles of all secrets, skipping `disabled` forms (used by tests to prove the
/// verifier catches what the scrubber misses). The first secret/form to produce a byte string owns it.
pub fn expand(secrets: &[Secret], disabled: &[Form]) -> Vec<Needle> {
    let mut needles: Vec<Needle> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (index, secret) in secrets.iter().enumerate() {
        for (form, bytes) in forms_of(&secret.value) {
            if disabled.contains(&form) || bytes.is_empty() || !seen.insert(bytes.clone()) {
                continue;
            }
            needles.push(Needle {
                bytes,
                secret: index,
                form,
            });
        }
    }
    needles
}

/// Every (form, bytes) of one value; forms equal to an earlier one are removed by [`expand`].
pub fn forms_of(value: &[u8]) -> Vec<(Form, Vec<u8>)> {
    let mut out = vec![(Form::Raw, value.to_vec())];
    if let Ok(text) = std::str::from_utf8(value) {
        let escaped = json_escape(text);
        out.push((Form::JsonEscaped, escaped.clone().into_bytes()));
        if escaped.contains('/') {
            out.push((
                Form::JsonEscapedSlash,
                escaped.replace('/', "\\/").into_bytes(),
            ));
        }
        if !text.is_ascii() {
            out.push((
                Form::JsonEscapedAscii,
                json_escape_ascii(&escaped).into_bytes(),
            ));
        }
        let chars: Vec<char> = text.chars().collect();
        if chars.len() >= 8 {
            let head: String = chars[..4].iter().collect();
            for (form, tail) in [(Form::Masked4x3, 3), (Form::Masked4x4, 4)] {
                let tail: String = chars[chars.len() - tail..].iter().collect();
                out.push((form, format!("{head}****{tail}").into_bytes()));
            }
        }
    }
    out.push((
        Form::UrlEncoded,
        percent_encode(value, false, b"0123456789ABCDEF"),
    ));
    out.push((
        Form::UrlEncodedLower,
        percent_encode(value, false, b"0123456789abcdef"),
    ));
    out.push((
        Form::FormEncoded,
        percent_encode(value, true, b"0123456789ABCDEF"),
    ));
    for align in 0..3u8 {
        for (form, engine) in [
            (Form::Base64Std(align), &STANDARD),
            (Form::Base64Url(align), &URL_SAFE),
        ] {
            let core = base64_core(value, align as usize, engine);
            if core.len() >= MIN_CORE {
                out.push((form, core));
            }
        }
    }
    out.push((Form::HexLower, hex::encode(value).into_bytes()));
    out.push((Form::HexUpper, hex::encode_upper(value).into_bytes()));
    out
}

/// The characters of base64(`align` bytes of other data + value + more data) that depend only on
/// the value: they appear whenever the value is base64-encoded at that alignment.
fn base64_core(value: &[u8], align: usize, engine: &impl Engine) -> Vec<u8> {
    let mut buf = vec![0u8; align];
    buf.extend_from_slice(value);
    let encoded = engine.encode(&buf).into_bytes();
    let start = (8 * align).div_ceil(6);
    let end = (8 * (align + value.len())) / 6;
    if end <= start {
        Vec::new()
    } else {
        encoded[start..end].to_vec()
    }
}

/// JSON string escaping as serde_json writes it, without the quotes.
fn json_escape(text: &str) -> String {
    let quoted = serde_json::to_string(text).expect("strings serialise");
    quoted[1..quoted.len() - 1].to_string()
}

/// Replaces non-ASCII characters of an escaped string with `\uXXXX` (surrogate pairs as needed).
fn json_escape_ascii(escaped: &str) -> String {
    let mut out = String::new();
    for c in escaped.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// RFC 3986 percent-encoding (unreserved characters kept); `plus_for_space` gives the form variant.
fn percent_encode(value: &[u8], plus_for_space: bool, digits: &[u8; 16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() * 3);
    for &b in value {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else if b == b' ' && plus_for_space {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[b'%', digits[(b >> 4) as usize], digits[(b & 15) as usize]]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_cores_appear_in_every_alignment() {
        let value = b"sk-test-0123456789abcdef";
        for align in 0..3 {
            for prefix_len in [align, align + 3, align + 6] {
                let mut data = b"xyzuvwabc"[..prefix_len].to_vec();
                data.extend_from_slice(value);
                data.extend_from_slice(b"trailing");
                for engine in [&STANDARD, &URL_SAFE] {
                    let encoded = engine.encode(&data);
                    let core = base64_core(value, align, engine);
                    assert!(core.len() >= 28, "core too short: {}", core.len());
                    assert!(
                        encoded.as_bytes().windows(core.len()).any(|w| w == core),
                        "align {align}"
                    );
                }
            }
        }
    }

    #[test]
    fn forms_cover_escapes_masks_and_encodings() {
        let forms = forms_of("pa ss/wörd\"12".as_bytes());
        let get = |f: Form| {
            forms
                .iter()
                .find(|(g, _)| *g == f)
                .map(|(_, b)| String::from_utf8(b.clone()).unwrap())
        };
        assert_eq!(get(Form::JsonEscaped).unwrap(), "pa ss/wörd\\\"12");
        assert_eq!(get(Form::JsonEscapedSlash).unwrap(), "pa ss\\/wörd\\\"12");
        assert_eq!(
            get(Form::JsonEscapedAscii).unwrap(),
            "pa ss/w\\u00f6rd\\\"12"
        );
        assert_eq!(get(Form::UrlEncoded).unwrap(), "pa%20ss%2Fw%C3%B6rd%2212");
        assert_eq!(get(Form::FormEncoded).unwrap(), "pa+ss%2Fw%C3%B6rd%2212");
        assert_eq!(get(Form::Masked4x3).unwrap(), "pa s****\"12");
        assert_eq!(get(Form::Masked4x4).unwrap(), "pa s****d\"12");
        assert_eq!(get(Form::HexLower).unwrap(), hex::encode("pa ss/wörd\"12"));
    }

    #[test]
    fn expand_dedups_identical_forms() {
        let secret = Secret {
            name: "N".into(),
            value: b"abcdefghij".to_vec(),
            origin: String::new(),
        };
        let needles = expand(std::slice::from_ref(&secret), &[]);
        let mut all: Vec<_> = needles.iter().map(|n| n.bytes.clone()).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), needles.len());
        assert!(
            !needles.iter().any(|n| n.form == Form::JsonEscaped),
            "same as raw, so dropped"
        );
        let without = expand(&[secret], &[Form::HexLower]);
        assert!(!without.iter().any(|n| n.form == Form::HexLower));
    }
}
