//! The report of `tasks check`: per task, per check, pass / warn / FAIL / skip with the
//! reasons; as a table, as JSON (`runner.task-check/v1`) or as GitHub annotations.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Value, json};

/// The checks, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CheckName {
    /// Fields, legacy fields, digest, Harbor's static lint rules.
    Loads,
    /// The oracle scores 1 every time (`--repeat`), within half the agent timeout.
    Oracle,
    /// The nop agent scores 0.
    Nop,
    /// The oracle's outputs, all emptied, score 0.
    Broken,
    /// Reward-hack probes after a do-nothing agent score 0.
    Hacks,
    /// No file of tests/ or solution/ is readable by the agent; the instruction holds no solution.
    Leaks,
    /// Nothing is downloaded at test time; images are pinned.
    Reproducible,
}

impl CheckName {
    /// Every check, in column order.
    pub const ALL: [CheckName; 7] = [
        CheckName::Loads,
        CheckName::Oracle,
        CheckName::Nop,
        CheckName::Broken,
        CheckName::Hacks,
        CheckName::Leaks,
        CheckName::Reproducible,
    ];

    /// The name in the table and in `--checks`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::Loads => "loads",
            CheckName::Oracle => "oracle",
            CheckName::Nop => "nop",
            CheckName::Broken => "broken",
            CheckName::Hacks => "hacks",
            CheckName::Leaks => "leaks",
            CheckName::Reproducible => "reproducible",
        }
    }
}

/// A check's verdict, worst last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Not run (not selected, or not applicable; the messages say why).
    Skip,
    /// Passed.
    Pass,
    /// Passed with something to fix.
    Warn,
    /// Failed: the task is broken.
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Skip => "skip",
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

/// One reason, tied to a task file when it has one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// Why: pass, warn or fail.
    pub status: Status,
    /// What was found and what to do.
    pub text: String,
    /// The file, relative to the task directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Its line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

/// A check's verdict and reasons.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The worst of the messages (pass when there are none).
    pub status: Status,
    /// The reasons.
    pub messages: Vec<Message>,
}

impl CheckResult {
    /// A verdict from messages: the worst status among them, pass when none.
    pub fn of(messages: Vec<Message>) -> CheckResult {
        let status = messages
            .iter()
            .map(|m| m.status)
            .filter(|s| *s != Status::Skip)
            .max()
            .unwrap_or(if messages.is_empty() {
                Status::Pass
            } else {
                Status::Skip
            });
        CheckResult { status, messages }
    }

    /// Not run, for `why`.
    pub fn skipped(why: impl Into<String>) -> CheckResult {
        CheckResult::of(vec![Message::new(Status::Skip, why)])
    }
}

impl Message {
    /// A message about no file in particular.
    pub fn new(status: Status, text: impl Into<String>) -> Message {
        Message {
            status,
            text: text.into(),
            path: None,
            line: None,
        }
    }

    /// A message about `path` (relative to the task), at `line` if known.
    pub fn at(
        status: Status,
        text: impl Into<String>,
        path: PathBuf,
        line: Option<usize>,
    ) -> Message {
        Message {
            status,
            text: text.into(),
            path: Some(path),
            line,
        }
    }
}

/// One task's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskReport {
    /// The task's name.
    pub name: String,
    /// Its directory.
    pub path: PathBuf,
    /// Its content digest, when it loaded.
    pub digest: Option<String>,
    /// The verdict of each check.
    pub checks: BTreeMap<CheckName, CheckResult>,
    /// How long each oracle trial's agent phase took, in seconds.
    pub oracle_seconds: Vec<f64>,
    /// How long the whole check of this task took, in seconds.
    pub seconds: f64,
}

impl TaskReport {
    /// True when a check failed.
    pub fn failed(&self) -> bool {
        self.checks.values().any(|c| c.status == Status::Fail)
    }
}

/// The table: one row per task, one column per check, then each non-pass reason.
pub fn text(reports: &[TaskReport]) -> String {
    let width = reports
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!("{:width$}", "task");
    for check in CheckName::ALL {
        out.push_str(&format!(
            "  {:<w$}",
            check.as_str(),
            w = check.as_str().len().max(4)
        ));
    }
    out.push_str("  time\n");
    for report in reports {
        out.push_str(&format!("{:width$}", report.name));
        for check in CheckName::ALL {
            let label = report
                .checks
                .get(&check)
                .map_or("skip", |c| c.status.label());
            out.push_str(&format!("  {:<w$}", label, w = check.as_str().len().max(4)));
        }
        out.push_str(&format!("  {:.0}s\n", report.seconds));
    }
    let mut reasons = String::new();
    for report in reports {
        if let Some(digest) = &report.digest {
            reasons.push_str(&format!("{} digest {digest}\n", report.name));
        }
        for (check, result) in &report.checks {
            for m in result.messages.iter().filter(|m| m.status != Status::Pass) {
                let place = match (&m.path, m.line) {
                    (Some(p), Some(l)) => format!(" {}:{l}:", p.display()),
                    (Some(p), None) => format!(" {}:", p.display()),
                    _ => String::new(),
                };
                reasons.push_str(&format!(
                    "{} {} {}:{place} {}\n",
                    report.name,
                    check.as_str(),
                    m.status.label(),
                    m.text
                ));
            }
        }
    }
    if !reasons.is_empty() {
        out.push('\n');
        out.push_str(&reasons);
    }
    let failed = reports.iter().filter(|r| r.failed()).count();
    out.push_str(&format!(
        "\n{} task(s) checked, {failed} with a failing check\n",
        reports.len()
    ));
    out
}

/// The `runner.task-check/v1` document.
pub fn json(reports: &[TaskReport]) -> Value {
    json!({
        "schema": "runner.task-check/v1",
        "passed": !reports.iter().any(TaskReport::failed),
        "tasks": reports,
    })
}

/// GitHub workflow commands: one `::error`/`::warning` per reason, on the task's file
/// (task.toml when the reason has none), so a pull request shows them on its diff. Paths are
/// made relative to `base` (the checkout, where the workflow runs) when they are under it.
pub fn github(reports: &[TaskReport], base: &std::path::Path) -> String {
    let mut out = String::new();
    for report in reports {
        for (check, result) in &report.checks {
            for m in &result.messages {
                let level = match m.status {
                    Status::Fail => "error",
                    Status::Warn => "warning",
                    _ => continue,
                };
                let file = report
                    .path
                    .join(m.path.clone().unwrap_or_else(|| "task.toml".into()));
                let file = file.strip_prefix(base).unwrap_or(&file);
                let line = m.line.map_or(String::new(), |l| format!(",line={l}"));
                out.push_str(&format!(
                    "::{level} file={}{line},title={} {}::{}\n",
                    escape_property(&file.display().to_string()),
                    escape_property(&report.name),
                    check.as_str(),
                    escape_data(&m.text)
                ));
            }
        }
    }
    out
}

/// GitHub's escaping of a command's message.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub's escaping of a command's property.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<TaskReport> {
        let mut checks = BTreeMap::new();
        checks.insert(CheckName::Loads, CheckResult::of(vec![]));
        checks.insert(
            CheckName::Nop,
            CheckResult::of(vec![Message::new(Status::Fail, "the nop agent scored 1")]),
        );
        checks.insert(
            CheckName::Reproducible,
            CheckResult::of(vec![Message::at(
                Status::Warn,
                "the verifier downloads at test time",
                "tests/test.sh".into(),
                Some(3),
            )]),
        );
        checks.insert(CheckName::Hacks, CheckResult::skipped("not selected"));
        vec![TaskReport {
            name: "org/broken".into(),
            path: "/d/broken".into(),
            digest: Some("sha256:1111".into()),
            checks,
            oracle_seconds: vec![1.5],
            seconds: 12.0,
        }]
    }

    #[test]
    fn the_three_formats() {
        let reports = sample();
        assert!(reports[0].failed());
        insta::assert_snapshot!("check-text", text(&reports));
        insta::assert_json_snapshot!("check-json", json(&reports));
        insta::assert_snapshot!("check-github", github(&reports, std::path::Path::new("/d")));
    }
}
