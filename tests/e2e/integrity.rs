//! Issue 9's load-time and offline-tool defects, through the real `runner` binary: task files
//! that would make a trial vanish or run the wrong thing are refused at load (exit 2, naming
//! file, field, task and feature, before any container starts), and `scrub`/`validate-*` read
//! hostile inputs (a gzip bomb, `/dev/zero`, a 1 GiB record) with bounded memory. Peak RSS is
//! measured with `wait4` on the child.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{Job, ensure_base_image, measured, reward, runner, workspace_root};

fn fixture(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures/integrity").join(name)
}

/// `runner run --agent oracle` on `path` that must be refused at load: returns stderr after
/// checking the exit code is 2 and that no job directory was started.
fn run_refused(path: &Path) -> String {
    let jobs = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["run", "--agent", "oracle", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(path)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let started: Vec<_> = std::fs::read_dir(jobs.path()).unwrap().collect();
    assert!(
        started.is_empty(),
        "a refused dataset starts no job: {started:?}"
    );
    stderr
}

/// [`run_refused`] on the fixture `name`, asserting that stderr says every one of `fragments`.
fn refused_saying(name: &str, fragments: &[&str]) -> String {
    let stderr = run_refused(&fixture(name));
    testkit::assert_says_all(&stderr, fragments);
    stderr
}

#[test]
fn a_timeout_that_overflows_a_duration_is_refused_naming_file_field_and_limit() {
    refused_saying(
        "overflow-timeout",
        &[
            "overflow-timeout/task.toml: agent.timeout_sec: 1e20 is out of range",
            "at most 604800 seconds (1 week)",
        ],
    );
}

#[test]
fn a_negative_healthcheck_interval_is_refused_naming_the_field() {
    refused_saying(
        "negative-healthcheck",
        &[
            "negative-healthcheck/task.toml: environment.healthcheck.interval_sec",
            "at least 0",
        ],
    );
}

#[test]
fn two_tasks_with_one_name_are_refused_naming_both_directories() {
    refused_saying(
        "duplicate-names",
        &[
            "duplicate-names/first",
            "duplicate-names/second",
            "fixtures/same-name",
        ],
    );
}

#[test]
fn a_dataset_toml_entry_naming_a_missing_task_is_refused() {
    refused_saying(
        "missing-listed",
        &["missing-listed/dataset.toml", "\"fixtures/absent\""],
    );
}

#[test]
fn a_task_needing_a_tpu_is_refused_naming_the_feature() {
    refused_saying(
        "tpu",
        &[
            "task fixtures/tpu",
            "TPUs ([environment.tpu]) are not supported yet",
        ],
    );
}

#[test]
fn a_refused_task_in_a_dataset_is_reported_and_the_rest_run() {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["run", "--agent", "oracle", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(fixture("refused-dataset"))
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(2),
        "a skipped task is bad input: {stderr}"
    );
    assert!(
        stderr.contains("skipping task: task fixtures/tpu")
            && stderr.contains("TPUs ([environment.tpu]) are not supported yet"),
        "{stderr}"
    );
    let results = Job::single_in(jobs.path()).trial_results();
    assert_eq!(results.len(), 1, "only the plain task ran");
    assert_eq!(results[0].1["task_name"], "fixtures/plain");
    assert_eq!(reward(&results[0].1), Some(1.0));
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[test]
fn validate_trajectory_of_dev_zero_ends_quickly_with_a_size_error() {
    let run = measured(
        &os(&["validate-trajectory", "/dev/zero"]),
        Duration::from_secs(60),
    );
    eprintln!(
        "validate-trajectory /dev/zero: {:.1}s, peak RSS {:.0} MiB",
        run.elapsed.as_secs_f64(),
        run.peak_rss_mib
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("/dev/zero") && run.stderr.contains("256 MiB limit for a trajectory"),
        "{}",
        run.stderr
    );
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
    // The cap itself (256 MiB) plus the reader's growth; never the unbounded stream.
    assert!(run.peak_rss_mib < 700.0, "{}", run.peak_rss_mib);
}

/// A 512-byte ustar header for a regular file `name` of `size` bytes.
fn tar_header(name: &str, size: u64) -> Vec<u8> {
    fn put(h: &mut [u8], at: usize, text: &str) {
        h[at..at + text.len()].copy_from_slice(text.as_bytes());
    }
    let mut h = vec![0u8; 512];
    put(&mut h, 0, name);
    put(&mut h, 100, "0000644\0");
    put(&mut h, 108, "0000000\0");
    put(&mut h, 116, "0000000\0");
    put(&mut h, 124, &format!("{size:011o}\0"));
    put(&mut h, 136, "00000000000\0");
    put(&mut h, 148, "        ");
    put(&mut h, 156, "0");
    put(&mut h, 257, "ustar\0");
    put(&mut h, 263, "00");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    put(&mut h, 148, &format!("{sum:06o}\0 "));
    h
}

/// Gzips `data` with the system's gzip (the e2e crate keeps its dependencies small).
fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new("gzip")
        .args(["-9", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip runs");
    let mut stdin = child.stdin.take().unwrap();
    let input = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(output.status.success());
    output.stdout
}

/// A tar.gz of about 1 MB holding one 1 GiB file of zeros: gzip members can be concatenated,
/// so one compressed 64 MiB block of zeros is repeated.
fn tar_gz_bomb() -> Vec<u8> {
    const BLOCK: usize = 64 << 20;
    const BLOCKS: usize = 16;
    let mut bomb = gzip(&tar_header("zeros.bin", (BLOCK * BLOCKS) as u64));
    bomb.extend(gzip(&vec![0u8; BLOCK]).repeat(BLOCKS));
    bomb.extend(gzip(&[0u8; 1024]));
    bomb
}

#[test]
fn scrub_of_a_tar_gz_bomb_aborts_as_unscannable_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    let trial = job.join("task__AbC123");
    std::fs::create_dir_all(trial.join("artifacts")).unwrap();
    std::fs::write(job.join("config.json"), "{}\n").unwrap();
    std::fs::write(trial.join("trial.log"), "token abcdefghijklmnopqrst\n").unwrap();
    let bomb = tar_gz_bomb();
    assert!(bomb.len() < 2 << 20, "the bomb is {} bytes", bomb.len());
    std::fs::write(trial.join("artifacts/bomb.tar.gz"), &bomb).unwrap();
    let out = dir.path().join("public");
    let mut args = os(&["scrub", "--secret", "TOKEN=abcdefghijklmnopqrst", "--in"]);
    args.extend([
        job.into_os_string(),
        "--out".into(),
        out.clone().into_os_string(),
    ]);
    let run = measured(&args, Duration::from_secs(300));
    eprintln!(
        "scrub of a {} byte bomb: {:.1}s, peak RSS {:.0} MiB",
        bomb.len(),
        run.elapsed.as_secs_f64(),
        run.peak_rss_mib
    );
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("task__AbC123/artifacts/bomb.tar.gz")
            && run.stderr.contains("unscannable")
            && run.stderr.contains("decompression limit"),
        "{}",
        run.stderr
    );
    assert!(!out.exists(), "an aborted scrub writes nothing");
    assert!(
        run.peak_rss_mib < 150.0,
        "peak RSS {} MiB",
        run.peak_rss_mib
    );
}

/// A job dir with one trial whose files are given as (path, contents) pairs.
fn job_dir(root: &Path, trial_files: &[(&str, &[u8])]) -> PathBuf {
    let job = root.join("job");
    std::fs::create_dir_all(&job).unwrap();
    std::fs::write(
        job.join("config.json"),
        r#"{"job_name": "j", "agents": [{"name": "oracle", "model_name": null}]}"#,
    )
    .unwrap();
    for (path, contents) in trial_files {
        let full = job.join("t__1").join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, contents).unwrap();
    }
    job
}

#[test]
fn validate_submission_refuses_a_1_gib_record_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let job = job_dir(dir.path(), &[("config.json", b"{}")]);
    // Sparse: a gigabyte to read, nothing on disk.
    std::fs::File::create(job.join("t__1/result.json"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let mut args = os(&["validate-submission", "--min-trials", "1"]);
    args.push(job.into_os_string());
    let run = measured(&args, Duration::from_secs(300));
    eprintln!(
        "validate-submission with a 1 GiB result.json: {:.1}s, peak RSS {:.0} MiB",
        run.elapsed.as_secs_f64(),
        run.peak_rss_mib
    );
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("t__1/result.json") && run.stdout.contains("16 MiB limit"),
        "{}",
        run.stdout
    );
    assert!(
        run.peak_rss_mib < 150.0,
        "peak RSS {} MiB",
        run.peak_rss_mib
    );
}

#[test]
fn a_job_dir_without_trials_is_not_a_valid_submission() {
    let dir = tempfile::tempdir().unwrap();
    let job = job_dir(dir.path(), &[]);
    let output = runner()
        .args(["validate-submission", "--min-trials", "1"])
        .arg(&job)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("has no trials"), "{stdout}");
}
