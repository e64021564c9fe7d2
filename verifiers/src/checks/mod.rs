//! Named checks: the per-test pass/fail the verifier reports, from CTRF JSON or pytest `-rA` output.

mod ctrf;
mod pytest;

use std::path::Path;

use tasks::records::NamedCheck;

use crate::host_read::{ReadFailure, read_regular_file};

pub use ctrf::parse_ctrf;
pub use pytest::parse_pytest_summary;

/// The CTRF report's name inside the verifier directory.
pub const CTRF_JSON: &str = "ctrf.json";
/// The captured test output's name inside the verifier directory.
pub const TEST_STDOUT: &str = "test-stdout.txt";
/// Check sources above this size are not parsed (they are informational, never scored).
pub const CHECKS_FILE_LIMIT: u64 = 16 * 1024 * 1024;

/// Checks that passed and checks that count, as `(passed, total)`.
///
/// Skipped and pending checks did not run, so they are left out of the total; an expected
/// failure (`xfailed`) counts as passed because pytest treats it as success.
pub fn tally(checks: &[NamedCheck]) -> (u32, u32) {
    let counted = checks
        .iter()
        .filter(|c| !matches!(c.status.as_str(), "skipped" | "pending"));
    let (mut passed, mut total) = (0, 0);
    for check in counted {
        total += 1;
        if matches!(check.status.as_str(), "passed" | "xfailed") {
            passed += 1;
        }
    }
    (passed, total)
}

/// Reads the named checks from a downloaded verifier directory: `ctrf.json` if it is there and
/// valid, else the pytest summary in `test-stdout.txt`; `None` when neither yields any check.
pub fn read_checks(verifier_dir: &Path) -> Option<Vec<NamedCheck>> {
    if let Some(text) = read_text(&verifier_dir.join(CTRF_JSON)) {
        match parse_ctrf(&text) {
            Ok(checks) => return Some(checks),
            // Checks are informational: a broken report is worth a warning, not a failed trial.
            Err(error) => tracing::warn!(
                "ignoring {}: {error}",
                verifier_dir.join(CTRF_JSON).display()
            ),
        }
    }
    let stdout = read_text(&verifier_dir.join(TEST_STDOUT))?;
    let checks = parse_pytest_summary(&stdout);
    (!checks.is_empty()).then_some(checks)
}

fn read_text(path: &Path) -> Option<String> {
    match read_regular_file(path, CHECKS_FILE_LIMIT) {
        Ok(bytes) => bytes.map(|b| String::from_utf8_lossy(&b).into_owned()),
        Err(ReadFailure::Refused(refusal)) => {
            tracing::warn!("not parsing checks from {}: {refusal}", path.display());
            None
        }
        Err(ReadFailure::Io(e)) => {
            tracing::warn!("not parsing checks from {}: {e}", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, status: &str) -> NamedCheck {
        NamedCheck {
            name: name.into(),
            status: status.into(),
        }
    }

    #[test]
    fn tally_leaves_out_skipped_and_counts_xfail_as_passed() {
        let checks = [
            check("a", "passed"),
            check("b", "failed"),
            check("c", "skipped"),
            check("d", "error"),
            check("e", "xfailed"),
            check("f", "xpassed"),
            check("g", "pending"),
            check("h", "other"),
        ];
        assert_eq!(tally(&checks), (2, 6));
        assert_eq!(tally(&[]), (0, 0));
    }

    #[test]
    fn ctrf_wins_over_stdout_and_broken_ctrf_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TEST_STDOUT), "PASSED t.py::from_stdout\n").unwrap();
        std::fs::write(
            dir.path().join(CTRF_JSON),
            r#"{"results":{"tests":[{"name":"from_ctrf","status":"failed"}]}}"#,
        )
        .unwrap();
        assert_eq!(
            read_checks(dir.path()).unwrap(),
            vec![check("from_ctrf", "failed")]
        );

        std::fs::write(dir.path().join(CTRF_JSON), "{not json").unwrap();
        assert_eq!(
            read_checks(dir.path()).unwrap(),
            vec![check("t.py::from_stdout", "passed")]
        );
    }

    #[test]
    fn no_sources_or_no_checks_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_checks(dir.path()), None);
        std::fs::write(dir.path().join(TEST_STDOUT), "all good\n").unwrap();
        assert_eq!(read_checks(dir.path()), None);
    }

    #[test]
    fn symlinked_stdout_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "PASSED leaked::secret\n").unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join(TEST_STDOUT)).unwrap();
        assert_eq!(read_checks(dir.path()), None);
    }
}
