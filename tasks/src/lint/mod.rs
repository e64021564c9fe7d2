//! Static rules over a loaded task's files, for `runner tasks check`: the rules of Harbor
//! 0.26's `harbor lint` (`harbor/lint/task.py`) that apply to the task files, plus the
//! runner's own (legacy fields with their fix, answer leaks in the instruction, downloads at
//! test time judged against the verifier's network). Pure: files are read, nothing is run.
//!
//! Harbor's `shared-verifier` and `root-agent` rules are not applied: the runner's verifier
//! jail is what answers a shared verifier, and `tasks check` probes it with real agents.

mod rules;
pub mod shell;

use std::path::PathBuf;

pub use rules::{files_under, lint_task, verifier_network};

/// Which check of `tasks check` a finding belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    /// The task loads cleanly: fields, legacy fields, Harbor's lint.
    Loads,
    /// No answer leaks into what the agent can read.
    Leaks,
    /// The verifier and environment do not depend on the internet at test time.
    Reproducible,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth fixing; the task still works.
    Warn,
    /// The task is broken as written.
    Fail,
}

/// One finding: the rule (Harbor's name where Harbor has the rule), the file relative to the
/// task directory, the line when known, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// Rule name, e.g. `unpinned-python-dependency`.
    pub rule: &'static str,
    /// The check it belongs to.
    pub area: Area,
    /// Warn or fail.
    pub severity: Severity,
    /// The file, relative to the task directory.
    pub path: PathBuf,
    /// 1-based line, when the rule knows it.
    pub line: Option<usize>,
    /// What is wrong and what to do.
    pub message: String,
}
