//! `runner scrub` end to end: a job directory with secrets from a .env file, a JSON settings file,
//! the environment and flags; exit codes 0/1/2; no DEST on abort; input untouched; idempotence.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::files::snapshot;

use crate::support::{exited, runner};

/// Synthetic values made at test time (never realistic keys committed to the repo).
fn values(seed: u64) -> [String; 4] {
    let mut state = seed;
    let mut next = |len: usize| -> String {
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"[(state % 57) as usize]
                    as char
            })
            .collect()
    };
    [
        format!("sk-ant-api03-{}AA", next(93)),
        format!("ghp_{}", next(36)),
        format!("settings-token-{}", next(20)),
        format!("passthrough-{}", next(24)),
    ]
}

/// A hash of the whole tree: names, contents, link targets and modification times.
fn tree_hash(root: &Path) -> u64 {
    let mut hasher = DefaultHasher::new();
    for (path, data) in snapshot(root) {
        path.hash(&mut hasher);
        data.hash(&mut hasher);
        let meta = std::fs::symlink_metadata(root.join(&path)).unwrap();
        meta.modified().unwrap().hash(&mut hasher);
    }
    hasher.finish()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Gunzips with the system tool (the e2e crate keeps its dependencies small).
fn gunzip(path: &Path) -> Vec<u8> {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("gzip runs");
    assert!(out.status.success());
    out.stdout
}

/// A job directory as a harness leaves it, plus the secrets files that describe its values.
fn make_job(root: &Path, v: &[String; 4]) -> PathBuf {
    let job = root.join("job");
    let trial = job.join("task-a__1");
    std::fs::create_dir_all(trial.join("agent")).unwrap();
    std::fs::write(
        root.join("secrets.env"),
        format!("# keys\nANTHROPIC_API_KEY=\"{}\"\nDEBUG=true\n", v[0]),
    )
    .unwrap();
    std::fs::write(
        root.join("settings.json"),
        format!(r#"{{"model": "claude-x", "env": {{"GITHUB_TOKEN": "{}"}}, "auth": {{"token": "{}"}}}}"#, v[1], v[2]),
    )
    .unwrap();
    let masked = format!("{}****{}", &v[0][..4], &v[0][v[0].len() - 3..]);
    std::fs::write(
        trial.join("config.json"),
        format!(
            "{{\n    \"env\": {{\"ANTHROPIC_API_KEY\": \"{masked}\", \"EXTRA\": \"{}\"}}\n}}\n",
            v[3]
        ),
    )
    .unwrap();
    let (head, tail) = v[1].split_at(17);
    std::fs::write(
        trial.join("agent/terminal.log"),
        format!(
            "$ export GITHUB_TOKEN={head}\n{tail}\n\x1b[32mok\x1b[0m {}\nplain line\n",
            v[2]
        ),
    )
    .unwrap();
    std::fs::write(trial.join("agent/clean.txt"), "nothing secret here\n").unwrap();
    let archived = trial.join("agent/old.log");
    std::fs::write(&archived, format!("token {}\n", v[3])).unwrap();
    assert!(
        Command::new("gzip")
            .arg(&archived)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(job.join("result.json"), "{\"reward\": 1.0}\n").unwrap();
    job
}

/// `runner scrub --in JOB --out OUT`, with no secrets given yet.
fn scrub_in_out(job: &Path, out: &Path) -> assert_cmd::Command {
    let mut cmd = runner();
    cmd.arg("scrub").arg("--in").arg(job).arg("--out").arg(out);
    cmd
}

/// [`scrub_in_out`] with the job's secrets from its files, the environment and a flag.
fn scrub_cmd(root: &Path, job: &Path, out: &Path, v: &[String; 4]) -> assert_cmd::Command {
    let mut cmd = scrub_in_out(job, out);
    cmd.arg("--secrets-from").arg(root.join("secrets.env"));
    cmd.arg("--secrets-from").arg(root.join("settings.json"));
    cmd.args(["--env-passthrough", "SCRUB_E2E_PASSTHROUGH"])
        .env("SCRUB_E2E_PASSTHROUGH", &v[3]);
    cmd
}

#[test]
fn scrubs_a_job_directory_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let v = values(0xfeed_beef_0000_0001);
    let job = make_job(dir.path(), &v);
    let before = tree_hash(&job);
    let out = dir.path().join("public");
    let result = scrub_cmd(dir.path(), &job, &out, &v).output().unwrap();
    let logs = [result.stdout.clone(), result.stderr.clone()].concat();
    assert_eq!(
        result.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&logs)
    );
    assert_eq!(tree_hash(&job), before, "the input must not change");

    let copy = snapshot(&out);
    let gz = gunzip(&out.join("task-a__1/agent/old.log.gz"));
    for value in &v {
        assert!(!contains(&logs, value), "output streams never show a value");
        assert!(!contains(&gz, value));
        for (path, data) in &copy {
            assert!(!contains(data, value), "{path:?} still holds a value");
        }
    }
    let masked = &v[0][..4];
    assert!(!contains(
        &copy[Path::new("task-a__1/config.json")],
        &format!("{masked}****")
    ));
    assert_eq!(
        copy[Path::new("task-a__1/agent/clean.txt")],
        b"nothing secret here\n"
    );
    let terminal =
        String::from_utf8(copy[Path::new("task-a__1/agent/terminal.log")].clone()).unwrap();
    assert!(
        terminal.starts_with("$ export GITHUB_TOKEN=[REDACTED:GITHUB_TOKEN]\n\n"),
        "{terminal}"
    );
    assert_eq!(
        gunzip(&out.join("task-a__1/agent/old.log.gz")),
        b"token [REDACTED:SCRUB_E2E_PASSTHROUGH]\n"
    );

    let report: serde_json::Value =
        serde_json::from_slice(&copy[Path::new("scrub-report.json")]).unwrap();
    assert_eq!(report["outcome"], "clean");
    let rows = report["redactions"].as_array().unwrap();
    let has = |path: &str, form: &str| rows.iter().any(|r| r["path"] == path && r["form"] == form);
    assert!(has("task-a__1/config.json", "masked-4-3"), "{rows:?}");
    assert!(has("task-a__1/agent/old.log.gz", "raw"));
    assert!(rows.iter().any(|r| r["split"] == true));
    assert_eq!(report["skipped_benign"], serde_json::json!(["DEBUG"]));

    // A second scrub of the published copy finds nothing and changes nothing.
    let again = dir.path().join("again");
    let second = scrub_cmd(dir.path(), &out, &again, &v).output().unwrap();
    exited(&second, 0);
    let mut a = snapshot(&out);
    let mut b = snapshot(&again);
    a.remove(Path::new("scrub-report.json"));
    let report2: serde_json::Value =
        serde_json::from_slice(&b.remove(Path::new("scrub-report.json")).unwrap()).unwrap();
    assert_eq!(report2["totals"]["redactions"], 0);
    assert_eq!(a, b);
}

#[test]
fn unscannable_or_leftover_content_aborts_without_dest() {
    let dir = tempfile::tempdir().unwrap();
    let v = values(0xfeed_beef_0000_0002);
    let job = make_job(dir.path(), &v);
    let zipped = job.join("task-a__1/agent/bundle.zip");
    std::fs::write(dir.path().join("inner.txt"), &v[0]).unwrap();
    assert!(
        Command::new("zip")
            .arg("-qj")
            .arg(&zipped)
            .arg(dir.path().join("inner.txt"))
            .status()
            .unwrap()
            .success()
    );
    let before = tree_hash(&job);
    let out = dir.path().join("public");
    let result = scrub_cmd(dir.path(), &job, &out, &v).output().unwrap();
    let (_, stderr) = exited(&result, 1);
    assert!(!out.exists(), "no DEST after an abort");
    assert!(
        stderr.contains("task-a__1/agent/bundle.zip") && stderr.contains("--drop-unscannable"),
        "{stderr}"
    );
    assert_eq!(tree_hash(&job), before);
    let stray: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        stray
            .iter()
            .all(|n| !n.to_string_lossy().contains("scrub-")),
        "staging removed: {stray:?}"
    );

    let dropped = scrub_cmd(dir.path(), &job, &out, &v)
        .arg("--drop-unscannable")
        .output()
        .unwrap();
    exited(&dropped, 0);
    assert!(!out.join("task-a__1/agent/bundle.zip").exists());
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&zipped).unwrap();

    // A provider-key-shaped string nobody declared is a leftover: abort, name the file, not the key.
    let undeclared = format!("ghp_{}", &v[2][15..35].repeat(2)[..36]);
    std::fs::write(
        job.join("task-a__1/agent/extra.log"),
        format!("found {undeclared}\n"),
    )
    .unwrap();
    let result = scrub_cmd(dir.path(), &job, &out, &v).output().unwrap();
    let (_, stderr) = exited(&result, 1);
    assert!(
        stderr.contains("task-a__1/agent/extra.log") && !stderr.contains(&undeclared),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn bad_input_exits_2_without_showing_values() {
    let dir = tempfile::tempdir().unwrap();
    let v = values(3);
    let job = make_job(dir.path(), &v);
    let out = dir.path().join("public");
    let short = scrub_in_out(&job, &out)
        .args(["--secret", "PIN=4711x"])
        .output()
        .unwrap();
    let (_, stderr) = exited(&short, 2);
    assert!(
        stderr.contains("--allow-short") && stderr.contains("PIN") && !stderr.contains("4711x"),
        "{stderr}"
    );
    assert!(!out.exists());
    let allowed = scrub_in_out(&job, &out)
        .args(["--secret", "PIN=4711x", "--allow-short"])
        .output()
        .unwrap();
    exited(&allowed, 0);
    let exists = scrub_cmd(dir.path(), &job, &out, &v).output().unwrap();
    let (_, stderr) = exited(&exists, 2);
    assert!(stderr.contains("already exists"));
    let none = scrub_in_out(&job, &dir.path().join("x")).output().unwrap();
    let (_, stderr) = exited(&none, 2);
    assert!(stderr.contains("no secrets given"));
}

#[test]
fn help_explains_flags_and_exit_codes() {
    let help = runner().args(["scrub", "--help"]).output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "--in",
        "--out",
        "--secrets-from",
        "--env-passthrough",
        "--allow-short",
        "--drop-unscannable",
        "Exit codes",
    ] {
        assert!(text.contains(needle), "help lacks {needle}:\n{text}");
    }
}
