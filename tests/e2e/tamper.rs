//! Records that show tampering, against the real Docker engine: every trial's files hashed into
//! `record_manifest.jsonl` as it ends, trajectories bound to their trials, signed manifests
//! (`--signing-key`, `--trusted-key`), and `runner merge` writing copies. The forged
//! submission of issue 39 (a reward edited 0 → 1 in a shard, merged with an honest shard, one
//! unrelated trajectory copied into every rewarded trial) is INVALID and refused by merge.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use testkit::files::copy_dir;

use crate::support::{Job, edit_json, ensure_base_image, examples, exited, runner, workspace_root};

/// `runner run` of `agent` (flags) on hello-file, slow-oracle and nonroot-workdir, k=1.
fn run(jobs: &Path, name: &str, agent: &[&str], extra: &[&str]) {
    let output = runner()
        .args(["run", "-k", "1", "--progress", "none"])
        .args(agent)
        .arg("-p")
        .arg(examples())
        .args([
            "-i",
            "hello-file",
            "-i",
            "slow-oracle",
            "-i",
            "nonroot-workdir",
        ])
        .args(extra)
        .args(["--job-name", name, "-o"])
        .arg(jobs)
        .timeout(std::time::Duration::from_secs(900))
        .output()
        .unwrap();
    exited(&output, 0);
}

fn reference() -> Vec<String> {
    let config = workspace_root().join("adapter/agents/reference/agent.toml");
    vec!["--agent-config".into(), config.display().to_string()]
}

/// `validate-submission --format json` of `jobs` with `extra`: the report and the exit code.
fn validate(jobs: &[&Path], extra: &[&str]) -> (Value, i32) {
    let output = runner()
        .arg("validate-submission")
        .args(jobs)
        .args(["--min-trials", "1", "--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (report, output.status.code().unwrap_or(-1))
}

fn rule<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == name)
        .unwrap_or_else(|| panic!("no rule {name}: {report:#}"))
}

/// The violation messages of `name`, each with its file.
fn messages(report: &Value, name: &str) -> Vec<String> {
    rule(report, name)["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            format!(
                "{}: {}",
                v["file"].as_str().unwrap_or(""),
                v["message"].as_str().unwrap()
            )
        })
        .collect()
}

fn merge(out: &Path, parts: &[&Path], extra: &[&str]) -> Output {
    runner()
        .arg("merge")
        .arg("--out")
        .arg(out)
        .args(extra)
        .args(parts)
        .output()
        .unwrap()
}

/// The trial of `job` whose task is `task`.
fn trial_of(job: &Path, task: &str) -> String {
    Job {
        dir: job.to_owned(),
    }
    .trial_results()
    .into_iter()
    .find(|(_, r)| r["task_name"].as_str().is_some_and(|t| t.ends_with(task)))
    .unwrap_or_else(|| panic!("{}: no trial of {task}", job.display()))
    .0
}

/// Every regular file under `dir`, with its (device, inode) and link count.
fn inodes(dir: &Path, out: &mut Vec<(PathBuf, (u64, u64), u64)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.path().symlink_metadata().unwrap();
        if meta.is_dir() {
            inodes(&entry.path(), out);
        } else if meta.is_file() {
            out.push((entry.path(), (meta.dev(), meta.ino()), meta.nlink()));
        }
    }
}

#[test]
fn a_forged_shard_is_invalid_and_refused_by_merge_naming_the_edited_records() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let agent = reference();
    let agent: Vec<&str> = agent.iter().map(String::as_str).collect();
    // Shard 1: hello-file (solved) and slow-oracle (timed out, reward 0); shard 2: nonroot-workdir.
    run(&jobs, "s1", &agent, &["--shard", "1/2"]);
    run(&jobs, "s2", &agent, &["--shard", "2/2"]);
    let (s1, s2) = (jobs.join("s1"), jobs.join("s2"));
    let dataset = examples().display().to_string();
    for job in [&s1, &s2] {
        let bytes = std::fs::read(job.join(tasks::records::RECORD_MANIFEST)).unwrap();
        let manifest = tasks::records::RecordManifest::parse(&bytes).unwrap();
        for (name, _) in (Job {
            dir: job.to_path_buf(),
        })
        .trial_results()
        {
            let files = &manifest.trials[&name].files;
            for file in [
                "result.json",
                "agent/trajectory.json",
                "verifier/reward.txt",
            ] {
                assert!(
                    files.contains_key(file),
                    "{name}: {file} not hashed: {manifest:#?}"
                );
            }
        }
    }

    // Honest: every record and trajectory holds, shards and merged alike.
    let (report, _) = validate(&[&s1, &s2], &["--dataset", &dataset]);
    for name in ["records_unchanged", "trajectories_bound"] {
        assert_eq!(
            rule(&report, name)["status"],
            "passed",
            "{name}: {report:#}"
        );
    }
    let merged = tmp.path().join("merged");
    exited(&merge(&merged, &[&s1, &s2], &[]), 0);
    let (report, _) = validate(&[&merged], &["--dataset", &dataset]);
    assert_eq!(
        rule(&report, "records_unchanged")["status"],
        "passed",
        "{report:#}"
    );
    // Copies, never links into the parts: no inode shared, every file linked once.
    let (mut theirs, mut ours) = (Vec::new(), Vec::new());
    inodes(&s1, &mut theirs);
    inodes(&s2, &mut theirs);
    inodes(&merged, &mut ours);
    assert!(ours.len() > 10, "{ours:?}");
    for (path, inode, links) in &ours {
        assert_eq!(*links, 1, "{}", path.display());
        assert!(
            theirs.iter().all(|(_, i, _)| i != inode),
            "{} shares a part's inode",
            path.display()
        );
    }

    // The forgery: slow-oracle's reward edited 0 → 1, and nonroot-workdir's trajectory (shard
    // 2) copied into every rewarded trial.
    let forged = tmp.path().join("forged");
    copy_dir(&s1, &forged);
    let slow = trial_of(&forged, "slow-oracle");
    let hello = trial_of(&forged, "hello-file");
    edit_json(&forged.join(&slow).join("result.json"), |r| {
        r["verifier_result"]["rewards"]["reward"] = 1.0.into();
    });
    std::fs::write(forged.join(&slow).join("verifier/reward.txt"), "1").unwrap();
    let donor = s2
        .join(trial_of(&s2, "nonroot-workdir"))
        .join("agent/trajectory.json");
    for trial in [&slow, &hello] {
        std::fs::copy(&donor, forged.join(trial).join("agent/trajectory.json")).unwrap();
    }
    let (report, code) = validate(&[&forged, &s2], &["--dataset", &dataset]);
    assert_eq!(
        (report["valid"].as_bool(), code),
        (Some(false), 1),
        "{report:#}"
    );
    let changed = messages(&report, "records_unchanged");
    let slow_line = changed
        .iter()
        .find(|m| m.contains(&slow))
        .unwrap_or_else(|| panic!("{changed:?}"));
    // slow-oracle's agent timed out: its trajectory is replaced, or added where it wrote none.
    for file in [
        "result.json changed",
        "verifier/reward.txt changed",
        "agent/trajectory.json",
    ] {
        assert!(slow_line.contains(file), "{file}: {slow_line}");
    }
    assert!(
        changed
            .iter()
            .any(|m| m.contains(&hello) && m.contains("agent/trajectory.json changed")),
        "{changed:?}"
    );
    let bound = messages(&report, "trajectories_bound");
    assert!(
        bound
            .iter()
            .any(|m| m.contains("is the trajectory of 3 trials")),
        "{bound:?}"
    );
    assert!(
        bound
            .iter()
            .any(|m| m.contains(&slow) && m.contains("not the task's instruction")),
        "{bound:?}"
    );
    // merge refuses the forged shard, naming the trial and the files.
    let output = merge(&tmp.path().join("refused"), &[&forged, &s2], &[]);
    let (_, err) = exited(&output, 2);
    assert!(
        err.contains("records changed after the trial ended"),
        "{err}"
    );
    assert!(err.contains(&slow) || err.contains(&hello), "{err}");
    assert!(!tmp.path().join("refused").exists());

    // A forger who rewrites the manifest's hashes to match: the copied trajectory still
    // belongs to another trial, so validation and merge still refuse it.
    // (A later line of a trial replaces its earlier one, as a rerun's does.)
    let manifest = forged.join(tasks::records::RECORD_MANIFEST);
    let mut bytes = std::fs::read(&manifest).unwrap();
    for trial in [&slow, &hello] {
        let line = tasks::records::record_manifest::ManifestLine::trial(trial, &forged.join(trial));
        bytes.extend(line.unwrap().to_line());
    }
    std::fs::write(&manifest, bytes).unwrap();
    let (report, _) = validate(&[&forged, &s2], &["--dataset", &dataset]);
    assert_eq!(report["valid"], false);
    assert_eq!(
        rule(&report, "records_unchanged")["status"],
        "passed",
        "{report:#}"
    );
    assert_eq!(rule(&report, "trajectories_bound")["status"], "failed");
    let output = merge(&tmp.path().join("refused2"), &[&forged, &s2], &[]);
    let (_, err) = exited(&output, 2);
    assert!(err.contains("is the trajectory of 3 trials"), "{err}");
    // Deleting the manifest of a runner job hides nothing.
    std::fs::remove_file(forged.join(tasks::records::RECORD_MANIFEST)).unwrap();
    let (report, _) = validate(&[&forged], &[]);
    assert!(
        messages(&report, "records_unchanged")
            .iter()
            .any(|m| m.contains("missing, though runner wrote this job")),
        "{report:#}"
    );
}

/// An ed25519 key pair made as the README says: (private PEM, public PEM).
fn key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (key, public) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.pub.pem")),
    );
    let status = std::process::Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(&key)
        .status()
        .expect("openssl makes the test's keys");
    assert!(status.success());
    let status = std::process::Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(&key)
        .arg("-out")
        .arg(&public)
        .status()
        .unwrap();
    assert!(status.success());
    (key, public)
}

#[test]
fn a_signed_job_verifies_with_its_key_and_fails_after_a_one_byte_edit() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = key_pair(tmp.path(), "machine");
    let (_, stranger) = key_pair(tmp.path(), "stranger");
    // A key that cannot sign is refused before anything runs.
    let output = runner()
        .args(["run", "-a", "oracle", "-p"])
        .arg(examples().join("hello-file"))
        .arg("--signing-key")
        .arg(&public)
        .arg("-o")
        .arg(tmp.path().join("never"))
        .output()
        .unwrap();
    let (_, err) = exited(&output, 2);
    assert!(
        err.contains("--signing-key") && err.contains("openssl genpkey"),
        "{err}"
    );
    assert!(!tmp.path().join("never").exists());

    let jobs = tmp.path().join("jobs");
    let key_arg = key.display().to_string();
    run(
        &jobs,
        "signed",
        &["-a", "oracle"],
        &["--signing-key", &key_arg],
    );
    let job = jobs.join("signed");
    assert!(job.join("record_manifest.sig").is_file());
    let trusted = public.display().to_string();
    let (report, _) = validate(&[&job], &["--trusted-key", &trusted]);
    for name in ["records_unchanged", "trusted_signature"] {
        assert_eq!(
            rule(&report, name)["status"],
            "passed",
            "{name}: {report:#}"
        );
    }
    // Without --trusted-key the signature is still checked, the trust rule skipped.
    let (report, _) = validate(&[&job], &[]);
    assert_eq!(rule(&report, "trusted_signature")["status"], "skipped");
    // Another machine's key: not trusted.
    let (report, _) = validate(&[&job], &["--trusted-key", &stranger.display().to_string()]);
    assert_eq!(report["valid"], false);
    assert!(
        messages(&report, "trusted_signature")
            .iter()
            .any(|m| m.contains("not given with --trusted-key")),
        "{report:#}"
    );

    // One byte of a reward file: named.
    let hello = trial_of(&job, "hello-file");
    let reward = job.join(&hello).join("verifier/reward.txt");
    let original = std::fs::read(&reward).unwrap();
    let mut edited = original.clone();
    edited[0] ^= 1;
    std::fs::write(&reward, &edited).unwrap();
    let (report, _) = validate(&[&job], &["--trusted-key", &trusted]);
    assert_eq!(report["valid"], false);
    assert!(
        messages(&report, "records_unchanged")
            .iter()
            .any(|m| m.contains(&hello) && m.contains("verifier/reward.txt changed")),
        "{report:#}"
    );
    std::fs::write(&reward, &original).unwrap();
    // One byte of the manifest: the signature no longer holds.
    // (An empty line: the manifest still reads the same, its bytes do not.)
    let manifest = job.join(tasks::records::RECORD_MANIFEST);
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.push(b'\n');
    std::fs::write(&manifest, &bytes).unwrap();
    let (report, _) = validate(&[&job], &["--trusted-key", &trusted]);
    assert_eq!(report["valid"], false);
    assert!(
        messages(&report, "records_unchanged")
            .iter()
            .any(|m| m.contains("record_manifest.sig") && m.contains("does not match")),
        "{report:#}"
    );
    bytes.pop();
    std::fs::write(&manifest, &bytes).unwrap();

    // merge checks the part's signature and signs the merged job with its own key.
    let merged = tmp.path().join("merged");
    let output = merge(&merged, &[&job], &["--signing-key", &key_arg]);
    exited(&output, 0);
    assert!(merged.join("record_manifest.sig").is_file());
    let (report, _) = validate(&[&merged], &["--trusted-key", &trusted]);
    for name in ["records_unchanged", "trusted_signature"] {
        assert_eq!(
            rule(&report, name)["status"],
            "passed",
            "{name}: {report:#}"
        );
    }
}
