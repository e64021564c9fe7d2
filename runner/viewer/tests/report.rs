//! `write_report` over runner's and Harbor's fixture job dirs: the pages written, their
//! rows and steps, the agent's hostile output escaped, long logs cut with a link, symlinks
//! not followed.

mod support;

use std::path::{Path, PathBuf};

use support::*;
use testkit::files::copy_dir;
use viewer::{ViewerError, write_report};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// A copy of the runner job fixture at `rel` under a temp dir, to break on purpose.
struct ScratchJob {
    dir: tempfile::TempDir,
    job: PathBuf,
}

impl ScratchJob {
    fn new(rel: &str) -> ScratchJob {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join(rel);
        copy_dir(Path::new(RUNNER_JOB), &job);
        ScratchJob { dir, job }
    }

    /// Writes the job's report into `report/` of the temp dir and returns that dir.
    fn report(&self) -> PathBuf {
        let out = self.dir.path().join("report");
        write_report(std::slice::from_ref(&self.job), &out).unwrap();
        out
    }
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn writes_an_index_and_a_page_per_trial() {
    let out = tempfile::tempdir().unwrap();
    let summary = write_report(&all_jobs(), out.path()).unwrap();
    assert_eq!(summary.jobs, 3);
    assert_eq!(summary.trial_pages, 6 + 5 + 5);
    // runner: 3 + 3 (hello) + 3 (adversary) + 1 + 3 (slow); Harbor 0.13: 3 trajectories of 3
    // steps; Harbor 0.1.44: 2 of 3.
    assert_eq!(summary.steps, 13 + 9 + 6);
    let index = read(&summary.index);
    assert_eq!(count(&index, "<tr class=\"trial-row "), 16);
    assert_eq!(count(&index, "<tr class=\"task-row\" id=\"job-"), 3 + 1 + 1);
    assert_eq!(count(&index, "<tr class=\"job-row\""), 3);
    // Every reward key of the runner job, with its mean.
    for key in ["reward", "correctness", "format"] {
        assert!(
            index.contains(&format!("<tr class=\"reward-row\" data-key=\"{key}\">")),
            "{key}"
        );
    }
    assert!(
        index
            .contains("terminal-bench/terminal-bench-2-1 · terminus-2 · anthropic/claude-opus-4-6")
    );
    // Links from the index reach every trial page, and each page exists.
    let links = regex::Regex::new(r##"href="(job\d-[^"#]+\.html)""##).unwrap();
    let pages: std::collections::BTreeSet<&str> = links
        .captures_iter(&index)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert_eq!(pages.len(), 16);
    for page in pages {
        assert!(out.path().join(page).is_file(), "{page}");
    }
}

#[test]
fn a_trial_page_shows_phases_verifier_checks_log_and_conversation() {
    let out = tempfile::tempdir().unwrap();
    write_report(&all_jobs(), out.path()).unwrap();
    let page = read(
        &out.path()
            .join("job1-2026-12-01__10-00-00/hello__Ef45Gh6.html"),
    );
    assert_eq!(count(&page, "<tr class=\"phase-row\">"), 4);
    assert!(page.contains("agent execution"));
    assert!(
        page.contains("<td class=\"n\">33.0s</td>"),
        "agent execution took 33 s"
    );
    assert_eq!(count(&page, "<tr class=\"check-row passed\">"), 1);
    assert_eq!(count(&page, "<tr class=\"check-row failed\">"), 1);
    assert!(page.contains("1 failed, 1 passed in 0.03s"));
    assert!(page.contains("INFO trial hello__Ef45Gh6 started"));
    assert!(page.contains("data-steps=\"3\""));
    assert_eq!(count(&page, "<article class=\"step "), 3);
    assert_eq!(count(&page, "<div class=\"tool-call\""), 1);
    assert!(page.contains("bash /solution/solve.sh"));
    assert!(page.contains("observation for <code>c1</code>"));
    for key in ["reward", "correctness", "format"] {
        assert!(page.contains(&format!("data-key=\"{key}\"")), "{key}");
    }
    // Pages link to each other and back to the index.
    assert!(page.contains("href=\"../index.html#job-1\""));
    assert!(
        page.contains("href=\"../index.html#job-1-task-hello\""),
        "the task's row"
    );
    assert!(
        page.contains("href=\"hello__Ab12Cd3.html\""),
        "previous trial"
    );
    // The errored trial shows its exception and exception.txt.
    let page = read(
        &out.path()
            .join("job1-2026-12-01__10-00-00/slow__Mn01Op2.html"),
    );
    assert!(page.contains("AgentTimeoutError"));
    assert!(page.contains("raise the timeout or fix the agent"));
    assert!(page.contains("data-file=\"exception.txt\""));
    // Harbor's token metrics per step.
    let page = read(
        &out.path()
            .join("job2-2026-06-10__12-00-00/regex-log__aB3dE9x.html"),
    );
    assert!(page.contains("data-prompt-tokens=\"1200\""));
    assert!(page.contains("data-completion-tokens=\"80\""));
}

#[test]
fn the_agents_output_cannot_inject_markup() {
    let out = tempfile::tempdir().unwrap();
    write_report(&[path(RUNNER_JOB)], out.path()).unwrap();
    let page = read(
        &out.path()
            .join("job1-2026-12-01__10-00-00/adversary__Ij78Kl9.html"),
    );
    let index = read(&out.path().join("index.html"));
    for html in [&page, &index] {
        assert!(!html.contains("<script"), "a script element");
        assert!(!html.contains("<img src=x"));
        assert!(!html.contains("<iframe"));
        assert!(!html.contains("<b>"));
        assert!(!html.contains("<style>body"));
        assert!(!html.contains("href=\"javascript:"));
        assert!(!html.contains("src=\"javascript:"));
    }
    // The text is all there, escaped.
    assert!(page.contains("&lt;/pre&gt;&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;"));
    assert!(page.contains("test_&lt;b&gt;escape&lt;/b&gt;"));
    assert!(page.contains("&lt;script&gt;alert(&quot;log&quot;)&lt;/script&gt;"));
    assert!(page.contains("data-call-id=\"x&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;\""));
    assert!(page.contains("image javascript:alert(5) (image/png): not a file in the agent dir"));
    // No script may run even if escaping failed somewhere.
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none';"));
}

#[test]
fn long_logs_are_cut_with_a_link_and_symlinks_are_not_followed() {
    let scratch = ScratchJob::new("jobs/job");
    let trial = scratch.job.join("hello__Ab12Cd3");
    let line = "x".repeat(99) + "\n";
    std::fs::write(trial.join("trial.log"), line.repeat(3000)).unwrap();
    let secret = scratch.dir.path().join("host-secret.txt");
    std::fs::write(&secret, "HOST-SECRET-VALUE").unwrap();
    std::fs::remove_file(trial.join("verifier/test-stdout.txt")).unwrap();
    std::os::unix::fs::symlink(&secret, trial.join("verifier/test-stdout.txt")).unwrap();
    std::fs::remove_file(trial.join("agent/trajectory.json")).unwrap();
    std::os::unix::fs::symlink(&secret, trial.join("agent/trajectory.json")).unwrap();

    let out = scratch.report();
    let page = read(&out.join("job1-2026-12-01__10-00-00/hello__Ab12Cd3.html"));
    assert!(
        page.contains("Showing the first 64 KiB of 300000 bytes"),
        "cut"
    );
    assert!(
        page.contains("href=\"../../jobs/job/hello__Ab12Cd3/trial.log\""),
        "a relative link to the whole log"
    );
    assert!(page.len() < 120_000, "{} bytes", page.len());
    assert!(!page.contains("HOST-SECRET-VALUE"));
    assert!(page.contains("No verifier/test-stdout.txt."));
    assert!(page.contains("No agent/trajectory.json."));
}

#[test]
fn bad_records_are_shown_not_fatal() {
    let scratch = ScratchJob::new("job");
    let job = &scratch.job;
    std::fs::write(job.join("hello__Ab12Cd3/result.json"), "{ not json").unwrap();
    std::fs::write(job.join("slow__Qr34St5/agent/trajectory.json"), "[1, 2").unwrap();
    let out = scratch.report();
    let index = read(&out.join("index.html"));
    assert!(
        index.contains("hello__Ab12Cd3/result.json: not valid JSON"),
        "{index}"
    );
    let page = read(&out.join("job1-2026-12-01__10-00-00/slow__Qr34St5.html"));
    assert!(page.contains("Cannot read the trajectory (not valid JSON"));
}

#[test]
fn no_jobs_or_a_bad_dir_is_an_error() {
    let out = tempfile::tempdir().unwrap();
    assert!(matches!(
        write_report(&[], out.path()),
        Err(ViewerError::NoJobs)
    ));
    let err = write_report(&[out.path().join("nope")], out.path()).unwrap_err();
    assert!(matches!(err, ViewerError::NotADirectory { .. }));
}

#[test]
fn a_trial_page_lists_the_tests_programs_the_agent_changed() {
    let scratch = ScratchJob::new("job");
    let result_path = scratch.job.join("hello__Ef45Gh6/result.json");
    let mut result: serde_json::Value = serde_json::from_str(&read(&result_path)).unwrap();
    result["verifier_toolchain_changes"] =
        serde_json::json!(["/usr/local/bin/python3: added by the agent, earlier on PATH"]);
    result["verifier_isolation"] =
        serde_json::json!({"isolated": true, "detail": "jail", "toolchain": "image"});
    std::fs::write(&result_path, result.to_string()).unwrap();
    let out = scratch.report();
    let page = read(&out.join("job1-2026-12-01__10-00-00/hello__Ef45Gh6.html"));
    assert!(page.contains("the tests ran with the image"), "{page}");
    assert!(
        page.contains("<code>/usr/local/bin/python3: added by the agent, earlier on PATH</code>")
    );
    let untouched = read(&out.join("job1-2026-12-01__10-00-00/hello__Ab12Cd3.html"));
    assert!(!untouched.contains("the tests ran with the image"));
}
