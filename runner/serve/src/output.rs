//! Output caps: what a command printed, cut at the server's limit with a marker that says so.
//!
//! Every path that cuts (a blocking `exec`, a background process's `view`/`wait`, the tests'
//! output at `evaluate`) says it in three ways, so no trainer reads a cut transcript as
//! whole: `info.truncated` is true, `info.bytes_dropped` counts what was left out (for a
//! background process, `info.bytes_remaining` what the next view reads), and the output ends
//! with a marker line.

/// What [`cut`] made of an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The text to show: the output, and the marker line when it was cut.
    pub text: String,
    /// True when anything was left out.
    pub truncated: bool,
    /// Bytes left out (a floor when `at_least`).
    pub dropped: usize,
}

/// The marker line that ends a cut output; the numbers say what was kept of how much was
/// seen and how much was dropped.
pub fn marker(kept: usize, seen: usize, at_least: bool) -> String {
    let more = if at_least { "at least " } else { "" };
    let dropped = seen.saturating_sub(kept);
    format!(
        "\n[output truncated: {more}{dropped} bytes dropped; {kept} of {more}{seen} bytes shown]"
    )
}

/// The marker line that ends a background process's view when it wrote more than the view
/// holds: nothing is lost (the next `view` starts where this one ended), but this observation
/// is not the whole output.
pub fn more_marker(remaining: u64) -> String {
    format!("\n[output truncated: {remaining} more bytes not shown; view again to read them]")
}

/// Cuts `text` to at most `max` bytes (on a character boundary) and appends [`marker`] when
/// anything was left out. `seen` is how many bytes the command wrote when the caller knows
/// more than `text` holds (the in-container cap already cut it to `max`); `at_least` says
/// that count is a floor (a command killed before it said how much it dropped).
pub fn cut(text: &str, max: usize, seen: usize, at_least: bool) -> Cut {
    let seen = seen.max(text.len());
    if seen <= max && !at_least {
        return Cut {
            text: text.to_owned(),
            truncated: false,
            dropped: 0,
        };
    }
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_owned();
    out.push_str(&marker(end, seen, at_least));
    Cut {
        text: out,
        truncated: true,
        dropped: seen - end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_untouched() {
        let kept = cut("hello", 10, 5, false);
        assert_eq!(
            (kept.text.as_str(), kept.truncated, kept.dropped),
            ("hello", false, 0)
        );
    }

    #[test]
    fn long_output_is_cut_with_a_marker_on_a_char_boundary() {
        let out = cut("héllo world", 2, 12, false);
        assert!(out.truncated);
        assert_eq!(out.dropped, 11);
        assert!(out.text.starts_with('h'), "{}", out.text);
        assert!(
            out.text
                .ends_with("\n[output truncated: 11 bytes dropped; 1 of 12 bytes shown]"),
            "{}",
            out.text
        );
    }

    /// The case issue 39 found: the container already cut the output to exactly the cap and
    /// reported what it dropped; the text alone fits, yet the output was cut.
    #[test]
    fn an_output_cut_in_the_container_to_the_cap_is_marked() {
        let text = "x".repeat(64);
        let out = cut(&text, 64, 64 + 1000, false);
        assert!(out.truncated);
        assert_eq!(out.dropped, 1000);
        assert!(out.text.starts_with(&text));
        assert!(
            out.text
                .ends_with("[output truncated: 1000 bytes dropped; 64 of 1064 bytes shown]"),
            "{}",
            out.text
        );
    }

    #[test]
    fn an_output_capped_in_the_container_says_at_least() {
        let out = cut("abc", 3, 4, true);
        assert!(out.truncated);
        assert!(
            out.text
                .ends_with("at least 1 bytes dropped; 3 of at least 4 bytes shown]"),
            "{}",
            out.text
        );
    }
}
