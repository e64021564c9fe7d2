//! pytest `-rA` short test summary lines: `PASSED path::test`, `FAILED path::test - message`.

use std::sync::LazyLock;

use regex::Regex;
use tasks::records::NamedCheck;

static SUMMARY_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+)$")
        .expect("summary line pattern compiles")
});

// `SKIPPED [2] tests/test_x.py:12: reason` names a location, not a node id.
static SKIP_LOCATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\[\d+\] )?(.+?:\d+)(?::|$)").expect("skip location pattern compiles")
});

const SUMMARY_HEADER: &str = "short test summary info";

/// Parses the short test summary of pytest `-rA` output into named checks.
///
/// When the output has pytest's `short test summary info` header, only the lines after the
/// last one are read, so test output that happens to start with `PASSED` is not mistaken for
/// a result; without the header, every summary-shaped line counts.
pub fn parse_pytest_summary(output: &str) -> Vec<NamedCheck> {
    let lines: Vec<&str> = output.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with('=') && l.contains(SUMMARY_HEADER))
        .map(|i| i + 1);
    let section = &lines[start.unwrap_or(0)..];
    let mut checks = Vec::new();
    for line in section {
        let line = line.trim_end();
        // The summary ends at pytest's closing `=== N passed in 0.1s ===` rule.
        if start.is_some() && line.starts_with('=') {
            break;
        }
        if let Some(check) = parse_line(line) {
            checks.push(check);
        }
    }
    checks
}

fn parse_line(line: &str) -> Option<NamedCheck> {
    let caps = SUMMARY_LINE.captures(line)?;
    let rest = caps[2].trim();
    let status = match &caps[1] {
        "PASSED" => "passed",
        "FAILED" => "failed",
        "ERROR" => "error",
        "SKIPPED" => "skipped",
        "XFAIL" => "xfailed",
        _ => "xpassed",
    };
    let name = if status == "skipped" {
        SKIP_LOCATION
            .captures(rest)
            .map_or(rest, |c| c.get(1).map_or(rest, |m| m.as_str()))
    } else {
        // pytest 8 appends ` - message` (or ` - reason` for xfail/xpass) after the node id.
        rest.split_once(" - ").map_or(rest, |(name, _)| name)
    };
    Some(NamedCheck {
        name: name.to_owned(),
        status: status.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(checks: &[NamedCheck]) -> Vec<(&str, &str)> {
        checks
            .iter()
            .map(|c| (c.name.as_str(), c.status.as_str()))
            .collect()
    }

    #[test]
    fn parses_every_status_after_the_summary_header() {
        let output = "\
============================= test session starts ==============================
collected 6 items

../tests/test_outputs.py .F.sxX                                          [100%]

==================================== PASSES ====================================
PASSED is printed by a test here and must not count
=========================== short test summary info ============================
PASSED ../tests/test_outputs.py::test_a
FAILED ../tests/test_outputs.py::test_b - AssertionError: expected 1 - got 2
ERROR ../tests/test_outputs.py::test_c - fixture 'db' not found
SKIPPED [1] ../tests/test_outputs.py:40: needs a GPU
XFAIL ../tests/test_outputs.py::test_e - known bug
XPASS ../tests/test_outputs.py::test_f[param-1] - unexpectedly passing
PASSED ../tests/test_outputs.py::test_g[a b]
============== 1 failed, 2 passed, 1 skipped, 1 xfailed in 0.12s ===============
PASSED after the closing rule does not count
";
        assert_eq!(
            pairs(&parse_pytest_summary(output)),
            [
                ("../tests/test_outputs.py::test_a", "passed"),
                ("../tests/test_outputs.py::test_b", "failed"),
                ("../tests/test_outputs.py::test_c", "error"),
                ("../tests/test_outputs.py:40", "skipped"),
                ("../tests/test_outputs.py::test_e", "xfailed"),
                ("../tests/test_outputs.py::test_f[param-1]", "xpassed"),
                ("../tests/test_outputs.py::test_g[a b]", "passed"),
            ]
        );
    }

    #[test]
    fn without_a_header_every_summary_line_counts() {
        let output = "running checks\nPASSED check_one\nFAILED check_two - bad\nsomething else\n";
        assert_eq!(
            pairs(&parse_pytest_summary(output)),
            [("check_one", "passed"), ("check_two", "failed")]
        );
    }

    #[test]
    fn lookalike_lines_are_ignored() {
        let output = "PASSEDX a\n PASSED indented\nFAILED\npassed lower\n";
        assert!(parse_pytest_summary(output).is_empty());
    }

    #[test]
    fn crlf_output_is_handled() {
        assert_eq!(
            pairs(&parse_pytest_summary("PASSED t::a\r\nFAILED t::b - x\r\n")),
            [("t::a", "passed"), ("t::b", "failed")]
        );
    }
}
