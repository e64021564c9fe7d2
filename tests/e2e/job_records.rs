//! Every record of one job, as an insta snapshot: the oracle on five examples (one file, the
//! artifacts, two steps, a separate verifier, several rewards), one trial at a time, and the
//! job directory's files read back — names, and the text of each record — with what changes
//! from run to run filtered out. A refactor of the engine that claims "no behaviour change"
//! leaves this snapshot as it is. Against the real Docker engine.

use std::path::Path;
use std::time::Duration;

use crate::support::{ensure_base_image, exited, runner, workspace_root};

/// The example tasks the job runs.
const TASKS: [&str; 5] = [
    "hello-file",
    "artifacts",
    "two-step-gate",
    "separate-verifier",
    "multi-reward",
];

/// Files whose text is not shown (only their name): the live view's `.jsonl` streams, whose
/// lines depend on the moment. The record manifest is shown (see [`manifest_lines`]).
fn shows_text(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let text_like = [".json", ".txt", ".md", ".toml", ".sh", ".py", ".log"]
        .iter()
        .any(|ext| name.ends_with(ext));
    rel == tasks::records::RECORD_MANIFEST || (text_like && !name.ends_with(".jsonl"))
}

/// The record manifest's lines, each pretty-printed and filtered as the other records are, then
/// sorted: what each line holds is the record; the order of a trial's line and a lock write's
/// `job_files` line is the moment's.
fn manifest_lines(text: &str, filter: impl Fn(&str) -> String) -> String {
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            filter(&serde_json::to_string_pretty(&value).unwrap())
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

/// The runner's own lines of a log: command output (indented, the image build's and the
/// verifier jail's) depends on the engine's cache and the moment, the runner's lines do not.
/// `sorted`: in the job's log, one trial's end and the next one's start race each other.
fn runner_lines(text: &str, sorted: bool) -> String {
    let mut lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with("  "))
        .collect();
    if sorted {
        lines.sort_unstable();
    }
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Every file under `dir`, by its path relative to it, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// Filters applied after [`crate::snapshot::filters`], for what records hold: log clocks'
/// milliseconds, container names (the job id's first 8 characters), the build's commit, the
/// tests' epoch times and durations, and the sizes of the files whose text has times in it (or
/// the checkout's path, as the job's config.json and lock.json have, or how an image came).
fn record_filters() -> Vec<(String, String)> {
    [
        (r"\[CLOCK\]\.[0-9]+", "[CLOCK]"),
        (r"runner-[0-9a-f]{8}-", "runner-[JOB]-"),
        // The runner's build commit.
        (r#""git_commit_hash": "[0-9a-f]{40}""#, r#""git_commit_hash": "[COMMIT]""#),
        (r#""(start|stop)": [0-9]{13}"#, r#""$1": [EPOCH_MS]"#),
        (r#""duration": [0-9]+"#, r#""duration": [MS]"#),
        // Whether an image was built, pulled or reused depends on the engine's cache.
        (r#"(?m)\) (built|pulled|reused)( in \[TIME\])?$"#, ") [PREPARED]"),
        (r#""origin": "(built|pulled|reused)""#, r#""origin": "[PREPARED]""#),
        (
            r#"("(?:[^"]*/)?(?:trial\.log|job\.log|result\.json|test-stdout\.txt|ctrf\.json|config\.json|lock\.json)": \{\s*"sha256": "\[HEX\]",\s*"size": )[0-9]+"#,
            "${1}[SIZE]",
        ),
    ]
    .into_iter()
    .map(|(from, to)| (from.to_owned(), to.to_owned()))
    .collect()
}

#[test]
fn a_jobs_records_stay_as_they_are() {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let mut command = runner();
    command.args([
        "run",
        "-a",
        "oracle",
        "--n-concurrent",
        "1",
        "--job-name",
        "records",
    ]);
    for task in TASKS {
        command.args(["-i", task]);
    }
    let out = command
        .arg("--path")
        .arg(workspace_root().join("tasks/examples"))
        .arg("--jobs-dir")
        .arg(jobs.path())
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    exited(&out, 0);
    let job = jobs.path().join("records");

    let mut filters = crate::snapshot::filters();
    filters.extend(record_filters());
    let filter = |text: &str| {
        filters.iter().fold(text.to_owned(), |text, (from, to)| {
            regex::Regex::new(from)
                .unwrap()
                .replace_all(&text, to.as_str())
                .into_owned()
        })
    };
    let mut entries: Vec<(String, String)> = files_under(&job)
        .into_iter()
        .map(|rel| {
            let shown = if shows_text(&rel) {
                let bytes = std::fs::read(job.join(&rel)).unwrap();
                let text = String::from_utf8_lossy(&bytes);
                if rel.ends_with("trial.log") || rel == "job.log" {
                    runner_lines(&filter(&text), rel == "job.log")
                } else if rel == tasks::records::RECORD_MANIFEST {
                    manifest_lines(&text, filter)
                } else {
                    filter(&text)
                }
            } else {
                String::new()
            };
            (filter(&rel), shown)
        })
        .collect();
    entries.sort();
    let mut text = String::new();
    for (rel, shown) in entries {
        text.push_str(&format!("##### {rel}\n"));
        if !shown.is_empty() {
            text.push_str(shown.trim_end());
            text.push('\n');
        }
    }
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/e2e/snapshots"
    ));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!("job-records", text));
}
