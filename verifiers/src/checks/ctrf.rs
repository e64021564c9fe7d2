//! CTRF (Common Test Report Format) JSON, as pytest-json-ctrf writes to `/logs/verifier/ctrf.json`.

use serde::Deserialize;
use tasks::records::NamedCheck;

#[derive(Deserialize)]
struct Report {
    results: Results,
}

#[derive(Deserialize)]
struct Results {
    tests: Vec<Test>,
}

#[derive(Deserialize)]
struct Test {
    name: String,
    status: String,
}

/// A `ctrf.json` that is not a CTRF report (checks fall back to the pytest summary).
#[derive(Debug, thiserror::Error)]
#[error("not a CTRF report with results.tests[].name/status: {0}")]
pub struct CtrfError(#[source] serde_json::Error);

/// Parses a CTRF report's `results.tests[]` into named checks (status lower-cased).
pub fn parse_ctrf(text: &str) -> Result<Vec<NamedCheck>, CtrfError> {
    let report: Report = serde_json::from_str(text).map_err(CtrfError)?;
    Ok(report
        .results
        .tests
        .into_iter()
        .map(|t| NamedCheck {
            name: t.name,
            status: t.status.to_ascii_lowercase(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_and_statuses_ignoring_extra_fields() {
        let text = r#"{
          "results": {
            "tool": {"name": "pytest"},
            "summary": {"tests": 3, "passed": 1, "failed": 1, "skipped": 1},
            "tests": [
              {"name": "test_outputs.py::test_a", "status": "passed", "duration": 3},
              {"name": "test_outputs.py::test_b", "status": "failed", "message": "boom"},
              {"name": "test_outputs.py::test_c", "status": "SKIPPED"}
            ]
          }
        }"#;
        let checks = parse_ctrf(text).unwrap();
        let pairs: Vec<_> = checks
            .iter()
            .map(|c| (c.name.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("test_outputs.py::test_a", "passed"),
                ("test_outputs.py::test_b", "failed"),
                ("test_outputs.py::test_c", "skipped")
            ]
        );
    }

    #[test]
    fn empty_test_list_is_valid() {
        assert_eq!(parse_ctrf(r#"{"results": {"tests": []}}"#).unwrap(), vec![]);
    }

    #[test]
    fn wrong_shapes_are_errors() {
        assert!(parse_ctrf("{").is_err());
        assert!(
            parse_ctrf(r#"{"results": {}}"#)
                .unwrap_err()
                .to_string()
                .contains("tests")
        );
        assert!(
            parse_ctrf(r#"{"results": {"tests": [{"name": "x"}]}}"#)
                .unwrap_err()
                .to_string()
                .contains("status")
        );
    }
}
