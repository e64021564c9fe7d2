//! `runner run --shard I/N` and `runner merge` on a small part of the examples, against the
//! real Docker engine: shards are disjoint job dirs recording their part, merge back into one
//! job, resume as their shard only, and merging parts of different plans or conflicting
//! trials is refused by name; `validate-submission` over shards. (The whole examples at k=5,
//! sharded over Slurm and compared with the unsharded job, are in `slurm.rs`.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use testkit::files::copy_dir;

use crate::support::{
    Job, edit_json, ensure_base_image, examples, exited, json_file, runner, workspace_root,
};

/// The trial dirs (with a result) of a job dir, by name.
fn trials(dir: &Path) -> BTreeSet<String> {
    Job {
        dir: dir.to_owned(),
    }
    .trial_results()
    .into_iter()
    .map(|(name, _)| name)
    .collect()
}

/// The three example tasks every shard test runs: two the oracle solves, one it times out on.
const THREE_TASKS: [&str; 6] = [
    "-i",
    "hello-file",
    "-i",
    "nonroot-workdir",
    "-i",
    "slow-oracle",
];

fn run_shard(jobs: &Path, shard: &str, name: &str) -> std::process::Output {
    runner()
        .args(["run", "-a", "oracle", "-k", "2", "--progress", "none"])
        .arg("-p")
        .arg(examples())
        .args(THREE_TASKS)
        .args(["--shard", shard, "--job-name", name, "-o"])
        .arg(jobs)
        .output()
        .unwrap()
}

#[test]
fn bad_shard_values_are_refused_naming_the_flag() {
    for bad in ["0/3", "4/3", "x", "1/0"] {
        let output = runner()
            .args(["run", "-a", "oracle", "-p"])
            .arg(examples())
            .args(["--shard", bad])
            .output()
            .unwrap();
        let (_, err) = exited(&output, 2);
        assert!(err.contains("--shard"), "{bad}: {err}");
        assert!(err.contains("I/N"), "{bad}: {err}");
    }
}

#[test]
fn shards_are_disjoint_jobs_that_merge_resume_as_themselves_and_refuse_other_plans() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    exited(&run_shard(&jobs, "1/2", "s1"), 0);
    exited(&run_shard(&jobs, "2/2", "s2"), 0);
    let (s1, s2) = (jobs.join("s1"), jobs.join("s2"));

    // Each shard records its part, in config.json and result.json.
    for (dir, i) in [(&s1, 1), (&s2, 2)] {
        let config = json_file(&dir.join("config.json"));
        assert_eq!(
            (config["shard"].as_u64(), config["n_shards"].as_u64()),
            (Some(i), Some(2))
        );
        let result = json_file(&dir.join("result.json"));
        assert_eq!(
            (result["shard"].as_u64(), result["n_shards"].as_u64()),
            (Some(i), Some(2))
        );
    }
    // Disjoint by task, all k trials of a task in one shard: hello-file and nonroot-workdir
    // (60 s each) go one to each shard, slow-oracle (5 s) with the first by name.
    let task_of = |name: &str| name.split("__").next().unwrap().to_owned();
    let (t1, t2) = (trials(&s1), trials(&s2));
    assert!(t1.is_disjoint(&t2));
    assert_eq!(t1.len() + t2.len(), 6, "{t1:?} {t2:?}");
    let tasks1: BTreeSet<String> = t1.iter().map(|n| task_of(n)).collect();
    let tasks2: BTreeSet<String> = t2.iter().map(|n| task_of(n)).collect();
    assert_eq!(
        (
            tasks1.iter().map(String::as_str).collect::<Vec<_>>(),
            tasks2.iter().map(String::as_str).collect::<Vec<_>>()
        ),
        (vec!["hello-file", "slow-oracle"], vec!["nonroot-workdir"])
    );

    // Merged: one job of the whole plan, every trial copied in once, records recomputed.
    let merged = tmp.path().join("merged");
    let output = merge(&merged, &[&s1, &s2]);
    let (out, _) = exited(&output, 0);
    assert!(out.contains("6 trial(s) planned"), "{out}");
    assert_eq!(trials(&merged), t1.union(&t2).cloned().collect());
    let config = json_file(&merged.join("config.json"));
    assert!(
        config.get("shard").is_none() && config.get("n_shards").is_none(),
        "{config}"
    );
    assert_eq!(config["job_name"], "merged");
    // The parts' ids, which the merged trials keep recording as their job id.
    let part_ids: Vec<Value> = [&s1, &s2]
        .iter()
        .map(|dir| json_file(&dir.join("result.json"))["id"].clone())
        .collect();
    assert_eq!(config["merged_from"], Value::Array(part_ids));
    let result = json_file(&merged.join("result.json"));
    assert_eq!(result["n_total_trials"], 6);
    assert_eq!(result["stats"]["n_completed_trials"], 6);
    assert_eq!(result["coverage"]["scored"], 6);
    let eval = crate::support::only_eval(&result);
    // Two tasks solved, slow-oracle's trials time out (reward 0): 4 of 6.
    assert!((eval["metrics"][0]["mean"].as_f64().unwrap() - 4.0 / 6.0).abs() < 1e-12);
    assert_eq!(
        json_file(&merged.join("lock.json"))["trials"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    let log = std::fs::read_to_string(merged.join("job.log")).unwrap();
    assert!(
        log.contains(&format!("part 1: {} (shard 1/2", s1.display())),
        "{log}"
    );
    assert!(
        log.contains(&format!("part 2: {} (shard 2/2", s2.display())),
        "{log}"
    );
    // Copies, never hard links: an edit of the merged job never reaches a shard.
    use std::os::unix::fs::MetadataExt;
    let name = t2.iter().next().unwrap();
    let (part, whole) = (
        std::fs::metadata(s2.join(name).join("result.json")).unwrap(),
        std::fs::metadata(merged.join(name).join("result.json")).unwrap(),
    );
    assert_ne!(part.ino(), whole.ino());
    assert_eq!((part.nlink(), whole.nlink()), (1, 1));
    // The summary of the two shards given together is the merged job's.
    let summary = |dirs: &[&Path]| -> Value {
        let output = runner()
            .arg("summary")
            .args(dirs)
            .args(["--format", "json"])
            .output()
            .unwrap();
        let (out, _) = exited(&output, 0);
        let mut value: Value = serde_json::from_str(&out).unwrap();
        for key in ["job_dir", "job_name"] {
            value.as_object_mut().unwrap().remove(key);
        }
        value
    };
    assert_eq!(summary(&[&s1, &s2]), summary(&[&merged]));
    // view --as-one: one job of the two shards, a page per trial.
    let output = runner()
        .arg("view")
        .arg(&s1)
        .arg(&s2)
        .arg("--as-one")
        .arg("--out")
        .arg(tmp.path().join("view"))
        .output()
        .unwrap();
    let (out, _) = exited(&output, 0);
    assert!(out.contains("(1 job(s), 6 trial page(s))"), "{out}");
    // The same shard twice counts its trials once.
    assert_eq!(summary(&[&s1, &s2, &s1]), summary(&[&merged]));
    // A shard run where the dataset directory had another name records another source (so
    // another eval key); merged, its trials count under the first part's: one eval, 4 of 6.
    // (Records edited here stand for that run: its manifest goes too, as a job of a runner
    // that wrote none, which merge takes and reports as not recorded.)
    let elsewhere = tmp.path().join("s2-elsewhere");
    copy_dir(&s2, &elsewhere);
    for name in &t2 {
        edit_json(&elsewhere.join(name).join("result.json"), |r| {
            r["source"] = "tb2".into();
        });
    }
    std::fs::remove_file(elsewhere.join(tasks::records::RECORD_MANIFEST)).unwrap();
    let remerged = tmp.path().join("merged-elsewhere");
    exited(&merge(&remerged, &[&s1, &elsewhere]), 0);
    let keys = |dir: &Path| -> Vec<String> {
        let result = json_file(&dir.join("result.json"));
        result["stats"]["evals"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(keys(&remerged), keys(&s1));
    let result = json_file(&remerged.join("result.json"));
    let eval = crate::support::only_eval(&result);
    assert!((eval["metrics"][0]["mean"].as_f64().unwrap() - 4.0 / 6.0).abs() < 1e-12);
    let log = std::fs::read_to_string(remerged.join("job.log")).unwrap();
    assert!(
        log.contains(&format!(
            "trials of {} recorded source tb2 (their dataset directory's name there); the merged job counts them under examples, the source of {}",
            elsewhere.display(),
            s1.display()
        )),
        "{log}"
    );

    // The merged job cannot go inside a part.
    let output = merge(&s1.join("merged"), &[&s1, &s2]);
    let (_, err) = exited(&output, 2);
    assert!(err.contains("a job being merged"), "{err}");
    assert!(!s1.join("merged").exists());

    // A missing shard: merged, and reported with the exit code of an incomplete job.
    let part = tmp.path().join("part");
    let output = merge(&part, &[&s2]);
    let (out, _) = exited(&output, 3);
    assert!(out.contains("missing shard(s): 1 of 2"), "{out}");

    // The merged job resumes with nothing to run and still names its parts.
    let output = runner()
        .args(["jobs", "resume", "-p"])
        .arg(&merged)
        .output()
        .unwrap();
    let (_, err) = exited(&output, 0);
    assert!(err.contains("0 to run again, 0 new"), "{err}");
    assert_eq!(
        json_file(&merged.join("config.json"))["merged_from"],
        config["merged_from"]
    );

    // A shard resumes as itself: nothing to run; as another shard it is refused.
    let output = runner()
        .args(["jobs", "resume", "-p"])
        .arg(&s1)
        .output()
        .unwrap();
    let (_, err) = exited(&output, 0);
    assert!(err.contains("0 to run again, 0 new"), "{err}");
    let output = runner()
        .args(["run", "-a", "oracle", "-k", "2", "-p"])
        .arg(examples())
        .args(THREE_TASKS)
        .args(["--shard", "2/2", "--resume"])
        .arg(&s1)
        .output()
        .unwrap();
    let (_, err) = exited(&output, 2);
    assert!(
        err.contains("shard: --shard 1/2 in the job, --shard 2/2 now"),
        "{err}"
    );

    // Parts of different plans are refused, naming what differs.
    let other = tmp.path().join("other");
    copy_dir(&s2, &other);
    edit_json(&other.join("config.json"), |c| {
        c["agent_timeout_multiplier"] = 2.0.into();
        c["n_attempts"] = 3.into();
    });
    edit_json(&other.join("lock.json"), |l| {
        l["dataset_digest"] = "sha256:other".into()
    });
    let output = merge(&tmp.path().join("refused"), &[&s1, &other]);
    let (_, err) = exited(&output, 2);
    for what in [
        "multipliers.agent_timeout_multiplier: null in A, 2.0 in B",
        "k (n_attempts): 2 in A, 3 in B",
        "dataset digest:",
    ] {
        assert!(err.contains(what), "{what}: {err}");
    }
    assert!(!tmp.path().join("refused").exists());

    // A trial present twice with different results is refused, naming it.
    let twin = tmp.path().join("twin");
    copy_dir(&s2, &twin);
    let trial = t2.iter().next().unwrap();
    edit_json(&twin.join(trial).join("result.json"), |r| {
        r["verifier_result"]["rewards"]["reward"] = 0.0.into();
    });
    let output = merge(&tmp.path().join("conflict"), &[&s1, &s2, &twin]);
    let (_, err) = exited(&output, 2);
    assert!(err.contains(&format!("trial {trial} is in")), "{err}");
    assert!(err.contains("different content"), "{err}");

    // A re-run's result wins over an infrastructure error of the same trial.
    let failed = tmp.path().join("failed");
    copy_dir(&s2, &failed);
    edit_json(&failed.join(trial).join("result.json"), |r| {
        r["exception_info"] = serde_json::json!({
            "exception_type": "EnvironmentStartError",
            "exception_message": "the engine went away",
            "exception_traceback": "",
            "occurred_at": "2026-12-01T00:00:00Z"
        });
        r["outcome"] = "infra_error".into();
        r["verifier_result"] = Value::Null;
    });
    let rerun = tmp.path().join("rerun");
    let output = merge(&rerun, &[&s1, &failed, &s2]);
    let (_, err) = exited(&output, 0);
    assert!(
        err.contains(&format!("trial {trial}: taken from {}", s2.display())),
        "{err}"
    );
    assert!(json_file(&rerun.join(trial).join("result.json"))["exception_info"].is_null());
}

/// The dataset of the shards' submission test: three examples, one per shard.
const ONE_PER_SHARD: [&str; 3] = ["hello-file", "multi-reward", "nonroot-workdir"];

/// The leaderboard's view of shards, with the reference installed agent (oracle trials have no
/// trajectory, which submissions need): `validate-submission` passes on the merged job and on
/// the three shards given together, and fails naming the missing tasks on two. The dataset is
/// three of the examples ([`crate::support::examples_subset`]), one task per shard: the rules
/// over shards are what is checked, and any dataset shows them (the whole examples pass
/// `validate-submission` at k=5 in `resume.rs`, with this agent, and in `bridge.rs`).
#[test]
fn validate_submission_takes_the_merged_job_or_all_shards_and_names_the_tasks_two_leave_out() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let examples = crate::support::examples_subset(tmp.path(), &ONE_PER_SHARD);
    let agent = workspace_root().join("adapter/agents/reference/agent.toml");
    // The three shards run at once, as three processes (each its own job dir), as a cluster
    // would run them; each must exit 0.
    let shards: Vec<PathBuf> = (1..=3).map(|i| jobs.join(format!("shard-{i}"))).collect();
    std::thread::scope(|scope| {
        let running: Vec<_> = (1..=3)
            .map(|i| {
                let (examples, agent, jobs) = (&examples, &agent, &jobs);
                scope.spawn(move || {
                    runner()
                        .arg("run")
                        .arg("-p")
                        .arg(examples)
                        .arg("--agent-config")
                        .arg(agent)
                        .args([
                            "-k",
                            "5",
                            "--progress",
                            "none",
                            "--shard",
                            &format!("{i}/3"),
                        ])
                        .args(["--job-name", &format!("shard-{i}"), "--jobs-dir"])
                        .arg(jobs)
                        .output()
                        .unwrap()
                })
            })
            .collect();
        for shard in running {
            exited(&shard.join().unwrap(), 0);
        }
    });
    let merged = tmp.path().join("merged");
    let parts: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let output = merge(&merged, &parts);
    exited(&output, 0);
    let validate = |dirs: &[PathBuf]| {
        runner()
            .arg("validate-submission")
            .args(dirs)
            .arg("--dataset")
            .arg(&examples)
            .output()
            .unwrap()
    };
    let (out, _) = exited(&validate(std::slice::from_ref(&merged)), 0);
    assert!(out.contains("Result: VALID"), "{out}");
    let (out, _) = exited(&validate(&shards), 0);
    assert!(out.contains("Result: VALID"), "{out}");
    assert!(out.contains("3 job dir(s), 15 trials, 3 tasks"), "{out}");
    // Two shards: the third's tasks are named as missing.
    let (out, _) = exited(&validate(&shards[..2]), 1);
    let third: Vec<String> = json_file(&shards[2].join("lock.json"))["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!third.is_empty());
    for task in &third {
        assert!(
            out.contains(&format!("task {task} has 0 trial(s)")),
            "{task}: {out}"
        );
    }
}

/// `runner merge --out OUT PARTS…`.
fn merge(out: &Path, parts: &[&Path]) -> std::process::Output {
    runner()
        .arg("merge")
        .arg("--out")
        .arg(out)
        .args(parts)
        .output()
        .unwrap()
}
