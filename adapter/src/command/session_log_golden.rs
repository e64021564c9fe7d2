//! What every golden test of a log converter checks first: the recorded log converts to valid
//! ATIF naming the session, agent, version and model expected, equal byte for byte to the
//! trajectory committed beside the log (`<log>.atif.json`; `RUNNER_UPDATE_GOLDEN=1` rewrites
//! it, to be read before committing).

use std::path::PathBuf;

use serde_json::Value;
use tasks::atif::Trajectory;

use super::LogError;

/// Who the converted trajectory must say it is.
pub struct Expected<'a> {
    pub session_id: &'a str,
    pub agent: &'a str,
    pub version: &'a str,
    pub model: &'a str,
}

/// Converts `tests/fixtures/agent-logs/<log>` with `convert` and the trial model `model`,
/// checks it, and returns it with its JSON value.
pub fn converted(
    convert: fn(&[u8], Option<&str>) -> Result<Trajectory, LogError>,
    log: &str,
    model: &str,
    expected: &Expected<'_>,
) -> (Trajectory, Value) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/agent-logs");
    let bytes = std::fs::read(dir.join(log)).unwrap();
    let trajectory = convert(&bytes, Some(model)).unwrap();
    let errors = trajectory.validate();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(trajectory.session_id.as_deref(), Some(expected.session_id));
    assert_eq!(trajectory.agent.name, expected.agent);
    assert_eq!(trajectory.agent.version, expected.version);
    assert_eq!(trajectory.agent.model_name.as_deref(), Some(expected.model));
    let value = trajectory.to_value();
    let text = serde_json::to_string_pretty(&value).unwrap() + "\n";
    let golden = dir.join(format!("{}.atif.json", log.trim_end_matches(".jsonl")));
    if std::env::var_os("RUNNER_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (RUNNER_UPDATE_GOLDEN=1 writes it)",
            golden.display()
        )
    });
    assert!(
        text == want,
        "{log} no longer converts to {}; the converter's output changed",
        golden.display()
    );
    (trajectory, value)
}
