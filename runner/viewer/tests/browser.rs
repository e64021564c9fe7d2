//! The report in a real browser: headless Chromium (Debian's `chromium` package) loads the
//! pages from `file://`, and the tests check the DOM it built (rows, steps, no injected
//! elements), fail on any console message (errors, CSP violations), and take screenshots.
//! Without Chromium these tests fail: install it with
//! `apt-get install -y --no-install-recommends chromium`, or point RUNNER_CHROMIUM at it.
//!
//! `RUNNER_UPDATE_SCREENSHOTS=1` also writes the README's screenshots to docs/img/.

mod support;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// A page that does not load in this time has hung the browser.
const TIMEOUT: Duration = Duration::from_secs(90);

fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("RUNNER_CHROMIUM") {
        return path.into();
    }
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .map(|dir| dir.join("chromium"))
            .collect::<Vec<_>>()
    });
    on_path.into_iter().find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "headless Chromium is needed for the report's browser tests and was not found on PATH: \
             apt-get install -y --no-install-recommends chromium (or set RUNNER_CHROMIUM)"
        )
    })
}

struct Run {
    stdout: String,
    /// Console messages of the page (`INFO:CONSOLE` lines of Chromium's log).
    console: Vec<String>,
}

/// Runs headless Chromium on `url` with `extra` flags and its own throwaway profile.
fn run_chromium(url: &str, extra: &[&str]) -> Run {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            // Tests run as root in CI, where Chromium's sandbox cannot start.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).unwrap();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        status.success(),
        "chromium failed on {url}: {status}\n{stderr}"
    );
    Run {
        stdout,
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_owned)
            .collect(),
    }
}

fn url(path: &Path) -> String {
    format!("file://{}", path.canonicalize().unwrap().display())
}

/// The DOM Chromium built for `page`, asserting the page logged nothing to the console.
fn dom(page: &Path) -> String {
    let run = run_chromium(&url(page), &["--dump-dom"]);
    assert!(
        run.console.is_empty(),
        "{} logged to the console:\n{}",
        page.display(),
        run.console.join("\n")
    );
    assert!(
        run.stdout.contains("</html>"),
        "no DOM for {}",
        page.display()
    );
    run.stdout
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

fn report() -> (tempfile::TempDir, PathBuf) {
    let out = tempfile::tempdir().unwrap();
    let summary = viewer::write_report(&all_jobs(), out.path()).unwrap();
    (out, summary.index)
}

/// The DOM of the report's page `page` (relative to the report dir), as the browser built it.
fn trial_dom(page: &str) -> String {
    let (out, _) = report();
    dom(&out.path().join(page))
}

#[test]
fn console_messages_are_caught() {
    // The check below must be able to fail: a page that logs an error and breaks its CSP.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<!doctype html><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">\
         <p>x</p><img src=\"http://127.0.0.1:9/x.png\">",
    )
    .unwrap();
    let run = run_chromium(&url(&page), &["--dump-dom"]);
    assert!(
        run.console
            .iter()
            .any(|l| l.contains("Content Security Policy")),
        "{:?}",
        run.console
    );
    let page = dir.path().join("error.html");
    std::fs::write(
        &page,
        "<!doctype html><script>console.error('boom')</script>",
    )
    .unwrap();
    let run = run_chromium(&url(&page), &["--dump-dom"]);
    assert!(
        run.console.iter().any(|l| l.contains("boom")),
        "{:?}",
        run.console
    );
}

#[test]
fn the_index_lists_every_job_task_and_trial() {
    let (_out, index) = report();
    let dom = dom(&index);
    assert_eq!(count(&dom, "class=\"job-row\""), 3);
    assert_eq!(count(&dom, "class=\"task-row\""), 5);
    assert_eq!(count(&dom, "class=\"trial-row "), 16);
    assert_eq!(count(&dom, "class=\"reward-row\""), 3 + 1 + 1);
    assert!(dom.contains("data-key=\"correctness\""));
    // The step counts reached the trial table: runner's hello trials have 3 steps each.
    assert!(dom.contains(r#"data-trial="hello__Ab12Cd3""#));
}

#[test]
fn a_trial_page_renders_its_conversation() {
    let dom = trial_dom("job2-2026-06-10__12-00-00/regex-log__aB3dE9x.html");
    assert_eq!(count(&dom, "<article class=\"step "), 3);
    assert!(dom.contains("data-steps=\"3\""));
    assert_eq!(count(&dom, "<div class=\"tool-call\""), 1);
    assert_eq!(count(&dom, "<div class=\"observation\""), 1);
    assert_eq!(count(&dom, "class=\"phase-row\""), 4);
    assert!(dom.contains("cat /app/log.txt | head"));
}

#[test]
fn hostile_agent_output_stays_text_in_the_browser() {
    let dom = trial_dom("job1-2026-12-01__10-00-00/adversary__Ij78Kl9.html");
    // The browser built no element and no attribute from the agent's text. In the
    // serialized DOM every `<` of text is `&lt;`, so these patterns only match real markup.
    for (element, expected) in [
        ("<script", 0),
        ("<iframe", 0),
        ("<img", 0),
        ("<b>", 0),
        ("<style", 1),
    ] {
        assert_eq!(count(&dom, element), expected, "{element}");
    }
    let handler = regex::Regex::new(r#"<[a-zA-Z][^>]*\son[a-z]+="#).unwrap();
    assert!(
        handler.is_match(r#"<p>x</p><img src="x" onerror="y">"#),
        "the pattern works"
    );
    assert!(!handler.is_match(&dom), "an event handler attribute");
    let js = regex::Regex::new(r#"<[a-zA-Z][^>]*(href|src)="javascript:"#).unwrap();
    assert!(
        js.is_match(r#"<a class="c" href="javascript:x">"#),
        "the pattern works"
    );
    assert!(!js.is_match(&dom), "a javascript: URL");
    assert!(dom.contains("&lt;/pre&gt;&lt;script&gt;alert(\"pwned\")&lt;/script&gt;"));
    assert_eq!(count(&dom, "<article class=\"step "), 3);
}

#[test]
fn screenshots() {
    let (out, index) = report();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("viewer-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let shots = [
        ("runner-view.png", index.clone(), "1280,1000"),
        (
            "runner-view-trial.png",
            out.path()
                .join("job2-2026-06-10__12-00-00/regex-log__aB3dE9x.html"),
            "1280,1300",
        ),
    ];
    for (name, page, size) in &shots {
        let png = dir.join(name);
        let _ = std::fs::remove_file(&png);
        let run = run_chromium(
            &url(page),
            &[
                &format!("--screenshot={}", png.display()),
                &format!("--window-size={size}"),
                "--hide-scrollbars",
            ],
        );
        assert!(run.console.is_empty(), "{:?}", run.console);
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{name} is not a PNG"
        );
        // A blank page compresses to a few KiB; a rendered report is far larger.
        assert!(
            bytes.len() > 30_000,
            "{name}: {} bytes, blank?",
            bytes.len()
        );
        if std::env::var_os("RUNNER_UPDATE_SCREENSHOTS").is_some() {
            let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(name), &bytes).unwrap();
        }
    }
}
