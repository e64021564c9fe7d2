//! ATIF step timestamps: accepted iff Python's `datetime.fromisoformat(v.replace("Z", "+00:00"))`
//! accepts them (Python ≥ 3.11 rules), which is how Harbor's validator checks them.
//!
//! Supported: `YYYY-MM-DD` or `YYYYMMDD`, optionally followed by any one separator character and
//! a time `HH[:MM[:SS[.f…]]]` or `HHMM[SS[.f…]]` (`,` also separates fractions), optionally
//! followed by an offset `±HH[[:]MM[[:]SS[.f…]]]`. ISO week dates (`2026-W23-3`), which Python
//! also accepts, are rejected here; no ATIF writer emits them.

/// True when `text` parses as Harbor's validator would parse it.
pub fn is_valid(text: &str) -> bool {
    let text = text.replace('Z', "+00:00");
    parse(text.as_bytes()).is_some()
}

fn parse(s: &[u8]) -> Option<()> {
    let rest = date(s)?;
    if rest.is_empty() {
        return Some(());
    }
    // Any single character separates date and time; it must be a whole UTF-8 character.
    let sep_len = utf8_len(rest[0])?;
    let rest = rest.get(sep_len..)?;
    let (time_part, offset) = match rest.iter().position(|b| *b == b'+' || *b == b'-') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    time(time_part, 23)?;
    if let Some(offset) = offset {
        time(offset, 23)?;
    }
    Some(())
}

fn utf8_len(first: u8) -> Option<usize> {
    match first {
        0x00..=0x7f => Some(1),
        0xc0..=0xdf => Some(2),
        0xe0..=0xef => Some(3),
        0xf0..=0xf7 => Some(4),
        _ => None,
    }
}

fn digits(s: &[u8], n: usize) -> Option<u32> {
    let part = s.get(..n)?;
    if !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(part).ok()?.parse().ok()
}

fn tail(s: &[u8], n: usize) -> &[u8] {
    s.get(n..).unwrap_or(&[])
}

/// Parses the date and returns what follows it.
fn date(s: &[u8]) -> Option<&[u8]> {
    let year = digits(s, 4)?;
    let (month, day, rest) = if s.get(4) == Some(&b'-') {
        let month = digits(tail(s, 5), 2)?;
        if s.get(7) != Some(&b'-') {
            return None;
        }
        (month, digits(tail(s, 8), 2)?, tail(s, 10))
    } else {
        (digits(tail(s, 4), 2)?, digits(tail(s, 6), 2)?, tail(s, 8))
    };
    chrono::NaiveDate::from_ymd_opt(year as i32, month, day)?;
    (year >= 1).then_some(rest)
}

/// Parses `HH[:MM[:SS[.f…]]]` or `HHMM[SS[.f…]]`, the whole of `s`.
fn time(s: &[u8], max_hour: u32) -> Option<()> {
    let hour = digits(s, 2)?;
    if hour > max_hour {
        return None;
    }
    let mut rest = &s[2..];
    let extended = rest.first() == Some(&b':');
    for (i, limit) in [59u32, 59].into_iter().enumerate() {
        if rest.is_empty() {
            return Some(());
        }
        if extended {
            if rest[0] != b':' {
                return None;
            }
            rest = &rest[1..];
        }
        let value = digits(rest, 2)?;
        if value > limit {
            return None;
        }
        rest = &rest[2..];
        if i == 1 && !rest.is_empty() {
            // Fractional seconds: a separator then at least one digit.
            if rest[0] != b'.' && rest[0] != b',' {
                return None;
            }
            let frac = &rest[1..];
            return (!frac.is_empty() && frac.iter().all(u8::is_ascii_digit)).then_some(());
        }
    }
    rest.is_empty().then_some(())
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn accepts_what_python_fromisoformat_accepts() {
        for ok in [
            "2026-06-10",
            "20260610",
            "2026-06-10T12:00:00Z",
            "2026-06-10T12:00:00.123456+00:00",
            "2026-06-10 12:00",
            "2026-06-10T12",
            "2026-06-10T120000",
            "2026-06-10T12:00:00,5-05:30",
            "2024-02-29T00:00:00",
            "2026-06-10T12:00:00+0530",
        ] {
            assert!(is_valid(ok), "{ok} should parse");
        }
    }

    #[test]
    fn rejects_what_python_rejects() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2025-02-29",
            "2026-06-10T25:00:00",
            "2026-06-10T12:60",
            "2026-06-10T12:00:00.",
            "2026-06-10T12:00:00 UTC",
            "10/06/2026",
            "2026-6-10",
        ] {
            assert!(!is_valid(bad), "{bad} should not parse");
        }
    }
}
