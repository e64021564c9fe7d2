//! `runner_snapshot!`: a command's whole output (exit code, stdout, stderr) as an insta
//! snapshot, with what changes from run to run filtered out, as uv's `uv_snapshot!` does.
//! A snapshot shows a reviewer exactly what users see; a `contains` assertion shows one
//! fragment of it.

use std::process::Output;

use crate::support::workspace_root;

/// Regex → replacement, applied in order: the checkout and temp paths, job ids, trial name
/// suffixes, digests and image tags, dates, clock times and durations.
pub fn filters() -> Vec<(String, String)> {
    let root = regex::escape(&workspace_root().display().to_string());
    [
        (root.as_str(), "[ROOT]"),
        (r"/tmp/\.tmp[A-Za-z0-9]+", "[TEMP]"),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[UUID]",
        ),
        (r"__[A-Za-z0-9]{7}\b", "__[SUFFIX]"),
        (r"sha256:[0-9a-f]{64}", "sha256:[DIGEST]"),
        (r"\b[0-9a-f]{64}\b", "[HEX]"),
        (r"(runner-task-[a-z0-9._-]+):[0-9a-f]{16}", "$1:[TAG]"),
        (r"\d{4}-\d{2}-\d{2}__\d{2}-\d{2}-\d{2}", "[JOB_NAME]"),
        (
            r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?",
            "[DATE]",
        ),
        (r"\b\d{2}:\d{2}:\d{2}\b", "[CLOCK]"),
        (r"\b(\d+m)?\d+(\.\d+)?(s|ms)\b", "[TIME]"),
    ]
    .into_iter()
    .map(|(from, to)| (from.to_owned(), to.to_owned()))
    .collect()
}

/// The text a snapshot holds: success, exit code, then both streams.
pub fn render(output: &Output) -> String {
    format!(
        "success: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
        output.status.success(),
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).trim_end(),
        String::from_utf8_lossy(&output.stderr).trim_end(),
    )
}

/// Snapshots `$output` (a `std::process::Output`) as `$name`, filtered by [`filters`] and any
/// extra `(regex, replacement)` pairs given after it.
#[macro_export]
macro_rules! runner_snapshot {
    ($name:expr, $output:expr $(, $extra:expr)* $(,)?) => {{
        #[allow(unused_mut)] // no extra filters given
        let mut filters = $crate::snapshot::filters();
        $(
            let (from, to): (&str, &str) = $extra;
            filters.insert(0, (from.to_owned(), to.to_owned()));
        )*
        let text = $crate::snapshot::render(&$output);
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e/snapshots"));
        settings.set_prepend_module_to_snapshot(false);
        for (from, to) in &filters {
            settings.add_filter(from, to.as_str());
        }
        settings.bind(|| insta::assert_snapshot!($name, text));
    }};
}
