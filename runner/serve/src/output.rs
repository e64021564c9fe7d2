//! Output caps: what a command printed, cut at the server's limit with a marker that says so.

/// The marker that ends a cut output; the numbers say what was kept of how much was seen.
pub fn marker(kept: usize, seen: usize, at_least: bool) -> String {
    let more = if at_least { "at least " } else { "" };
    format!("\n[output truncated: {kept} of {more}{seen} bytes shown]")
}

/// Cuts `text` to at most `max` bytes (on a character boundary) and appends [`marker`] when
/// anything was cut. `seen` is how many bytes the command wrote when the caller knows more
/// than `text` holds (the in-container cap stops reading), `capped` says the count is a floor.
pub fn cut(text: &str, max: usize, seen: usize, capped: bool) -> (String, bool) {
    let seen = seen.max(text.len());
    if text.len() <= max && !capped {
        return (text.to_owned(), false);
    }
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_owned();
    out.push_str(&marker(end, seen, capped));
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_untouched() {
        assert_eq!(cut("hello", 10, 5, false), ("hello".into(), false));
    }

    #[test]
    fn long_output_is_cut_with_a_marker_on_a_char_boundary() {
        let (out, cut_) = cut("héllo world", 2, 12, false);
        assert!(cut_);
        assert!(out.starts_with('h'), "{out}");
        assert!(
            out.ends_with("[output truncated: 1 of 12 bytes shown]"),
            "{out}"
        );
    }

    #[test]
    fn an_output_capped_in_the_container_says_at_least() {
        let (out, cut_) = cut("abc", 3, 4, true);
        assert!(cut_);
        assert!(out.ends_with("3 of at least 4 bytes shown]"), "{out}");
    }
}
