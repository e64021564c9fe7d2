//! The one place exit codes are decided.
//!
//! Every subcommand returns `Result<CommandOutcome, CliError>`; [`exit_code`] maps that to the
//! process's code. The README's exit-code table is [`markdown_table`] verbatim (a test checks
//! it), and `--help` texts show [`help_text`] of their subcommand.

use std::fmt;

/// A documented process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything asked for was done.
    Success,
    /// The input was read and judged, and it fails (a rule broken, a scrub aborted).
    Failed,
    /// The input is wrong: a path, flag, task, config or secret (or no engine to run on).
    BadInput,
    /// `run` finished but some planned trials have no result (infrastructure errors after
    /// retries, trials not run), or coverage is below `--min-coverage`.
    TrialsErrored,
    /// The runner itself failed: a record or report could not be written.
    RunnerFailed,
    /// Interrupted by Ctrl-C (SIGINT): 128 + 2, as shells report it.
    Interrupted,
    /// Stopped by SIGTERM (a scheduler's or `kill`'s): 128 + 15.
    Terminated,
    /// Stopped by SIGHUP (the terminal closed): 128 + 1.
    HungUp,
}

/// The signal that ended a command early; its exit code is 128 + the signal's number, so a
/// scheduler (Slurm, Kubernetes, systemd) sees the cause it would see of any other program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP.
    HangUp,
}

/// The subcommand families whose codes the README documents side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `runner run`, `runner jobs resume`.
    Run,
    /// `runner validate-submission`, `runner validate-trajectory`, `runner submission prepare`.
    Validate,
    /// `runner scrub`.
    Scrub,
    /// `runner tasks digest`.
    Tasks,
    /// `runner tasks check`.
    Check,
    /// `runner tasks init`.
    Init,
    /// `runner view`, `runner summary`, `runner compare`: reading job directories.
    Read,
    /// `runner images pull`, `runner images prune`.
    Images,
    /// `runner merge`.
    Merge,
}

#[cfg(test)]
impl Family {
    /// Every family, in the README's column order.
    pub const ALL: [Family; 9] = [
        Family::Run,
        Family::Validate,
        Family::Scrub,
        Family::Tasks,
        Family::Check,
        Family::Init,
        Family::Read,
        Family::Images,
        Family::Merge,
    ];

    fn heading(self) -> &'static str {
        match self {
            Family::Run => "`run`, `jobs resume`",
            Family::Validate => {
                "`validate-submission`, `validate-trajectory`, `submission prepare`"
            }
            Family::Scrub => "`scrub`",
            Family::Tasks => "`tasks digest`",
            Family::Check => "`tasks check`",
            Family::Init => "`tasks init`",
            Family::Read => "`view`, `summary`, `compare`",
            Family::Images => "`images pull`, `images prune`",
            Family::Merge => "`merge`",
        }
    }
}

impl ExitCode {
    /// Every code, in ascending order.
    pub const ALL: [ExitCode; 8] = [
        ExitCode::Success,
        ExitCode::Failed,
        ExitCode::BadInput,
        ExitCode::TrialsErrored,
        ExitCode::RunnerFailed,
        ExitCode::HungUp,
        ExitCode::Interrupted,
        ExitCode::Terminated,
    ];

    /// The numeric code.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Failed => 1,
            ExitCode::BadInput => 2,
            ExitCode::TrialsErrored => 3,
            ExitCode::RunnerFailed => 4,
            ExitCode::HungUp => 129,
            ExitCode::Interrupted => 130,
            ExitCode::Terminated => 143,
        }
    }

    /// What this code means for `family`, or `None` when that family never returns it.
    pub fn meaning(self, family: Family) -> Option<&'static str> {
        use ExitCode::*;
        use Family::*;
        Some(match (self, family) {
            (Success, Run) => {
                "every planned trial has a result: scored, or an agent error counted as 0 (with --min-coverage: at least that share is scored)"
            }
            (Success, Validate) => "valid (`submission prepare`: and the folder was written)",
            (Success, Scrub) => "clean copy written",
            (Success, Tasks) => "every task loaded (with --check: and matches the manifest)",
            (Failed, Tasks) => {
                "with --check: the dataset differs from the manifest (each task changed, missing or extra is listed)"
            }
            (Success, Init) => "the task directory was written (its path is printed)",
            (BadInput, Init) => "bad input: not a task name, or the directory exists",
            (Success, Check) => "no check failed (warnings may be listed)",
            (Failed, Check) => {
                "some check failed: each failure is listed with its task, check and reason"
            }
            (BadInput, Check) => {
                "bad input: a path with no task, a bad flag, or no reachable Docker engine"
            }
            (Interrupted, Check) => "interrupted (Ctrl-C); containers removed",
            (Terminated, Check) => "stopped by SIGTERM; containers removed",
            (HungUp, Check) => "stopped by SIGHUP; containers removed",
            (Success, Read) => "done",
            (Success, Images) => {
                "every image is ready (pull) or every candidate was handled (prune)"
            }
            (Success, Merge) => "the merged job has every planned trial's result",
            (BadInput, Merge) => {
                "bad input: a path that is not a job directory, jobs of different plans (the differences are named), a trial in two jobs with different results, or an --out that is not empty"
            }
            (TrialsErrored, Merge) => {
                "merged, but incomplete: a shard is missing, or planned trials have no result (infrastructure errors or not run)"
            }
            (Failed, Images) => "some images could not be pulled or built; each failure is shown",
            (Failed, Validate) => {
                "invalid: a rule is broken (`submission prepare`: nothing written, unless --force)"
            }
            (Failed, Scrub) => "aborted: leftovers or unscannable content; nothing written",
            (BadInput, Run) => {
                "bad input: missing or malformed path, flag, task or agent config, or no reachable Docker engine; also when malformed tasks of a dataset were skipped (the rest ran)"
            }
            (BadInput, Validate | Scrub) => "bad input",
            (BadInput, Tasks) => "bad input, or some tasks are malformed (they are listed)",
            (BadInput, Read) => "bad input: a path that is not a job directory",
            (BadInput, Images) => {
                "bad input, or no reachable Docker engine; also when malformed tasks were skipped (the rest were prepared)"
            }
            (TrialsErrored, Run) => {
                "some planned trials have no result: infrastructure errors after retries (image build, container start, backend, verifier sandbox, watchdog, pause) or trials not run; with --min-coverage, fewer scored than that share"
            }
            (RunnerFailed, _) => {
                "the runner itself failed: a record or report could not be written"
            }
            (Interrupted, Run) => "interrupted (Ctrl-C); containers removed, finished trials kept",
            (Terminated, Run) => "stopped by SIGTERM; containers removed, finished trials kept",
            (HungUp, Run) => {
                "stopped by SIGHUP (the terminal closed); containers removed, finished trials kept"
            }
            _ => return None,
        })
    }

    /// The code of a command ended early by `by`.
    pub fn interrupted_by(by: Interruption) -> ExitCode {
        match by {
            Interruption::Interrupt => ExitCode::Interrupted,
            Interruption::Terminate => ExitCode::Terminated,
            Interruption::HangUp => ExitCode::HungUp,
        }
    }

    /// The code of a subcommand's result.
    pub fn of(result: &Result<CommandOutcome, CliError>) -> ExitCode {
        match result {
            Ok(CommandOutcome::Success) => ExitCode::Success,
            Ok(CommandOutcome::Rejected) => ExitCode::Failed,
            // The user must fix malformed tasks before a full run, so it is bad input even
            // though the rest ran.
            Ok(CommandOutcome::TasksSkipped) => ExitCode::BadInput,
            Ok(CommandOutcome::TrialsErrored) => ExitCode::TrialsErrored,
            Ok(CommandOutcome::Interrupted(by)) => ExitCode::interrupted_by(*by),
            Err(error) => error.process_exit_code(),
        }
    }
}

/// What a subcommand achieved (its failures are [`CliError`]s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOutcome {
    /// Done as asked.
    Success,
    /// Judged and found failing: a submission or trajectory breaks a rule, a scrub aborted.
    Rejected,
    /// A job ran, but malformed tasks of its dataset were skipped.
    TasksSkipped,
    /// A job ran, but some planned trials have no result (or coverage is too low).
    TrialsErrored,
    /// A job was ended early by a signal.
    Interrupted(Interruption),
}

/// Who is at fault when a subcommand fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliErrorKind {
    /// The user's input (paths, flags, files) or environment (no Docker engine).
    BadInput,
    /// The runner could not do its own part (writing records or output).
    Runner,
}

/// A subcommand failure: whose fault it is, and the typed error itself with its chain of
/// causes (as cargo-nextest's `ExpectedError` keeps its sources), so `main` can print every
/// cause the top message does not already show.
#[derive(Debug)]
pub struct CliError {
    /// Whose fault it is (decides the exit code).
    pub kind: CliErrorKind,
    /// The failure as its own code raised it: a typed error whose `source()` chain is kept, or
    /// a message (a `String`) naming the file, flag or field and what to do.
    error: Box<dyn std::error::Error + Send + Sync>,
}

/// A typed error with what the caller knows in front of it (which file, which flag): shown as
/// `<context>: <error>`, the error kept as its `source()` so its own causes are still printed.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct InContext {
    message: String,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl InContext {
    fn new(
        context: impl fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        InContext {
            message: format!("{context}: {cause}"),
            source: Box::new(cause),
        }
    }
}

impl CliError {
    /// Bad input: `error` (a typed error, or a message) names the file, flag or field and
    /// what to do.
    pub fn bad_input(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            kind: CliErrorKind::BadInput,
            error: error.into(),
        }
    }

    /// The runner failed at its own work.
    pub fn runner(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            kind: CliErrorKind::Runner,
            error: error.into(),
        }
    }

    /// Bad input caused by `cause`, shown as `<context>: <cause>` (the message users saw
    /// before causes were kept), with `cause`'s own chain of causes kept for the report.
    pub fn bad_input_because(
        context: impl fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::bad_input(InContext::new(context, cause))
    }

    /// The runner's own failure caused by `cause`, shown as `<context>: <cause>`.
    pub fn runner_because(
        context: impl fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::runner(InContext::new(context, cause))
    }

    /// The process exit code of this failure (see [`ExitCode::of`]).
    pub fn process_exit_code(&self) -> ExitCode {
        match self.kind {
            CliErrorKind::BadInput => ExitCode::BadInput,
            CliErrorKind::Runner => ExitCode::RunnerFailed,
        }
    }

    /// What the user sees: `error: <message>`, then one `caused by: <cause>` line per error in
    /// the source chain. Many typed errors already quote their source in their own message
    /// (`reading x: permission denied`); a cause whose text an earlier line contains is
    /// skipped rather than said twice.
    pub fn report_lines(&self) -> Vec<String> {
        let mut lines = vec![format!("error: {}", self.error)];
        let mut cause = self.error.source();
        while let Some(error) = cause {
            let text = error.to_string();
            if !text.is_empty() && !lines.iter().any(|line| line.contains(&text)) {
                lines.push(format!("caused by: {text}"));
            }
            cause = error.source();
        }
        // The last guard of issue 39's item 5: a URL's user-info given anywhere (an engine's
        // URL, DOCKER_HOST) is never printed, whichever error quoted it.
        lines
            .iter()
            .map(|line| secrets::redact_url_credentials(line))
            .collect()
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// Transparent: a `CliError` wrapped by another error shows its inner error's causes.
impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// The README's exit-code table, generated from [`ExitCode::meaning`].
#[cfg(test)]
pub fn markdown_table() -> String {
    let mut out = String::from("| code |");
    for family in Family::ALL {
        out.push_str(&format!(" {} |", family.heading()));
    }
    out.push_str("\n|---|");
    for _ in Family::ALL {
        out.push_str("---|");
    }
    out.push('\n');
    for code in ExitCode::ALL {
        out.push_str(&format!("| {} |", code.code()));
        for family in Family::ALL {
            out.push_str(&format!(" {} |", code.meaning(family).unwrap_or("—")));
        }
        out.push('\n');
    }
    out
}

/// The "Exit codes:" paragraph of a subcommand's `--help`.
pub fn help_text(family: Family) -> String {
    let mut out = String::from("Exit codes:\n");
    for code in ExitCode::ALL {
        if let Some(meaning) = code.meaning(family) {
            out.push_str(&format!("  {:>3}  {meaning}\n", code.code()));
        }
    }
    out.push_str(
        "\nGlobal options: -q/--quiet and --color WHEN work here too (see `runner --help`).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readme() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md is readable")
    }

    /// The README's table, from its header row to the first line that is not a table row.
    fn readme_table(readme: &str) -> String {
        let start = readme
            .find("| code |")
            .expect("README.md has an exit-code table starting with `| code |`");
        readme[start..]
            .lines()
            .take_while(|line| line.starts_with('|'))
            .map(|line| format!("{line}\n"))
            .collect()
    }

    #[test]
    fn readme_lists_exactly_the_codes_and_meanings_the_enum_defines() {
        assert_eq!(
            readme_table(&readme()),
            markdown_table(),
            "README.md's exit-code table differs from exit.rs; paste `markdown_table()` into it"
        );
    }

    #[test]
    fn the_check_fails_when_a_row_is_removed() {
        let readme = readme();
        let row = format!("| {} |", ExitCode::TrialsErrored.code());
        let line = readme
            .lines()
            .find(|l| l.starts_with(&row))
            .expect("the README has a row for code 3");
        let without = readme.replace(&format!("{line}\n"), "");
        assert_ne!(readme_table(&without), markdown_table());
    }

    #[test]
    fn outcomes_and_errors_map_to_their_codes() {
        let cases = [
            (Ok(CommandOutcome::Success), 0),
            (Ok(CommandOutcome::Rejected), 1),
            (Ok(CommandOutcome::TasksSkipped), 2),
            (Ok(CommandOutcome::TrialsErrored), 3),
            (
                Ok(CommandOutcome::Interrupted(Interruption::Interrupt)),
                130,
            ),
            (
                Ok(CommandOutcome::Interrupted(Interruption::Terminate)),
                143,
            ),
            (Ok(CommandOutcome::Interrupted(Interruption::HangUp)), 129),
            (Err(CliError::bad_input("x")), 2),
            (Err(CliError::runner("x")), 4),
        ];
        for (result, code) in cases {
            assert_eq!(ExitCode::of(&result).code(), code, "{result:?}");
        }
    }

    /// An error whose message does not quote its cause, as a library's wrapper often is.
    #[derive(Debug, thiserror::Error)]
    #[error("the engine refused the request")]
    struct Refused(#[source] std::io::Error);

    #[test]
    fn the_report_prints_each_cause_once() {
        let cause = || std::io::Error::new(std::io::ErrorKind::PermissionDenied, "socket denied");
        let quoted = CliError::runner_because("writing /j/result.json", cause());
        assert_eq!(
            quoted.report_lines(),
            ["error: writing /j/result.json: socket denied"],
            "a cause the message already quotes is not said again"
        );
        assert_eq!(quoted.process_exit_code().code(), 4);

        let hidden = CliError::bad_input_because("--docker-host unix:///x", Refused(cause()));
        assert_eq!(
            hidden.report_lines(),
            [
                "error: --docker-host unix:///x: the engine refused the request",
                "caused by: socket denied",
            ]
        );
        assert_eq!(hidden.process_exit_code().code(), 2);

        let message = CliError::bad_input("--k must be at least 1");
        assert_eq!(message.report_lines(), ["error: --k must be at least 1"]);
    }

    #[test]
    fn every_code_means_something_to_some_family() {
        for code in ExitCode::ALL {
            assert!(Family::ALL.iter().any(|f| code.meaning(*f).is_some()));
        }
    }
}
