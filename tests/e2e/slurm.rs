//! Shards on a real cluster scheduler: a single-node Slurm from Debian's packages
//! (`scripts/slurm-local.sh`: munged, slurmctld and slurmd on localhost) runs the three shards
//! of the examples at k=2 as a job array (`sbatch --array=1-3`, each task `runner run --shard
//! $SLURM_ARRAY_TASK_ID/3`); they are merged and compared with the same job run unsharded:
//! the same trial names, rewards, mean, pass@k and intervals. A missing Slurm fails the test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{Job, ensure_base_image, exited, runner, runner_bin, workspace_root};

fn json(path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// Starts the local Slurm (installing it when missing) and waits for its node to be idle.
fn slurm_up() {
    let output = Command::new("bash")
        .arg(workspace_root().join("scripts/slurm-local.sh"))
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "scripts/slurm-local.sh could not start Slurm:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Submits `runner run <args> --shard $SLURM_ARRAY_TASK_ID/<n> --job-name shard-<i>` as a
/// job array of `n` tasks and waits for all of them; returns whether every task completed
/// with exit code 0, and the array tasks' states and output.
fn sbatch_shards(n: u32, jobs: &Path, logs: &Path, args: &[&str]) -> (bool, String) {
    let script = logs.join("shards.sbatch");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\nexec '{runner}' run {args} --shard \"$SLURM_ARRAY_TASK_ID/{n}\" \
             --job-name \"shard-$SLURM_ARRAY_TASK_ID\" --jobs-dir '{jobs}' --progress none\n",
            runner = runner_bin().display(),
            args = quoted.join(" "),
            jobs = jobs.display()
        ),
    )
    .unwrap();
    // Not `sbatch --wait`: it polls the controller after 2, 8, then every 32 s, so it
    // notices the array's end up to half a minute late. The array is polled here every 2 s
    // instead, and each task's own state and exit code are asserted (where --wait gave only
    // the highest exit code).
    let output = Command::new("sbatch")
        .arg("--parsable")
        .arg(format!("--array=1-{n}"))
        .arg("--job-name=runner-shards")
        .arg(format!("--output={}/shard-%a.out", logs.display()))
        .arg(format!("--chdir={}", workspace_root().display()))
        .arg(&script)
        .output()
        .expect("sbatch runs (scripts/slurm-local.sh installs it)");
    let submitted = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let mut text = format!(
        "sbatch: {submitted}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ok = output.status.success() && {
        let tasks = wait_for_array(submitted.split(';').next().unwrap_or_default(), n);
        text.push_str(&format!("\narray tasks: {tasks:?}"));
        tasks.len() == n as usize
            && tasks
                .iter()
                .all(|(_, state, code)| state == "COMPLETED" && code == "0:0")
    };
    for i in 1..=n {
        let out = std::fs::read_to_string(logs.join(format!("shard-{i}.out"))).unwrap_or_default();
        text.push_str(&format!("\n--- array task {i}:\n{out}"));
    }
    (ok, text)
}

/// The states Slurm leaves a job in once it has ended.
const ENDED: [&str; 9] = [
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
];

/// Polls `scontrol show job` of the array `id` every 2 s until its `n` tasks have each
/// ended (an hour at most); returns each task's (ArrayTaskId, JobState, ExitCode).
fn wait_for_array(id: &str, n: u32) -> Vec<(String, String, String)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    loop {
        let output = Command::new("scontrol")
            .args(["show", "job", "-o", id])
            .output()
            .expect("scontrol runs");
        let tasks: Vec<(String, String, String)> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| {
                let field = |name: &str| {
                    line.split_whitespace()
                        .find_map(|f| f.strip_prefix(name))
                        .unwrap_or_default()
                        .to_owned()
                };
                (
                    field("ArrayTaskId="),
                    field("JobState="),
                    field("ExitCode="),
                )
            })
            .collect();
        let ended = output.status.success()
            && tasks.len() == n as usize
            && tasks
                .iter()
                .all(|(_, state, _)| ENDED.contains(&state.as_str()));
        if ended {
            return tasks;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job array {id} has not ended: {tasks:?} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

fn run_unsharded(jobs: &Path, name: &str, args: &[&str]) {
    let output = runner()
        .arg("run")
        .args(args)
        .args(["--job-name", name, "--progress", "none", "--jobs-dir"])
        .arg(jobs)
        .output()
        .unwrap();
    exited(&output, 0);
}

/// Trial name → main reward (None: no reward) of a job dir.
fn rewards(dir: &Path) -> BTreeMap<String, Option<f64>> {
    Job {
        dir: dir.to_owned(),
    }
    .trial_results()
    .into_iter()
    .map(|(name, result)| (name, crate::support::reward(&result)))
    .collect()
}

/// The one eval of a result.json: its metrics, pass@k and intervals.
fn figures(result: &Value) -> Value {
    let evals = result["stats"]["evals"].as_object().expect("evals");
    assert_eq!(evals.len(), 1, "{evals:?}");
    let eval = evals.values().next().unwrap();
    serde_json::json!({
        "metrics": eval["metrics"],
        "pass_at_k": eval["pass_at_k"],
        "intervals": eval["intervals"],
        "n_trials": eval["n_trials"],
        "n_errors": eval["n_errors"],
    })
}

fn merge(out: &Path, parts: &[PathBuf]) {
    let output = runner()
        .arg("merge")
        .arg("--out")
        .arg(out)
        .args(parts)
        .output()
        .unwrap();
    exited(&output, 0);
}

#[test]
fn shards_of_the_examples_run_as_a_slurm_job_array_and_merge_to_the_unsharded_job() {
    ensure_base_image();
    slurm_up();
    let tmp = tempfile::tempdir().unwrap();
    let (jobs, logs) = (tmp.path().join("jobs"), tmp.path().join("logs"));
    std::fs::create_dir_all(&logs).unwrap();
    let examples = workspace_root().join("tasks/examples");
    let examples = examples.to_str().unwrap();
    // k=2: two trials of each task put a task's trials together in one shard and give pass@k
    // and intervals to compare; no leaderboard rule (k=5) is checked here.
    let args = ["-p", examples, "-a", "oracle", "-k", "2"];

    // The unsharded job runs beside the job array, as its own process, rather than after it:
    // the two share nothing but the jobs dir (other job names) and the Docker engine.
    let started = std::time::Instant::now();
    let (ok, output) = std::thread::scope(|scope| {
        let whole = scope.spawn(|| run_unsharded(&jobs, "whole", &args));
        let array = sbatch_shards(3, &jobs, &logs, &args);
        whole
            .join()
            .expect("the unsharded run failed (its output is above)");
        array
    });
    assert!(ok, "the job array failed:\n{output}");
    eprintln!(
        "slurm: 3 shards of the examples at k=2, and the unsharded job beside them, in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let shards: Vec<PathBuf> = (1..=3).map(|i| jobs.join(format!("shard-{i}"))).collect();
    for (i, shard) in shards.iter().enumerate() {
        let config = json(&shard.join("config.json"));
        assert_eq!(config["shard"].as_u64(), Some(i as u64 + 1), "{output}");
        assert_eq!(config["n_shards"].as_u64(), Some(3));
    }
    let merged = tmp.path().join("merged");
    merge(&merged, &shards);

    let whole = jobs.join("whole");
    let (a, b) = (rewards(&whole), rewards(&merged));
    assert_eq!(a.len(), 20);
    assert_eq!(a, b, "the same trial names and rewards");
    let (a, b) = (
        json(&whole.join("result.json")),
        json(&merged.join("result.json")),
    );
    assert_eq!(
        figures(&a),
        figures(&b),
        "the same mean, pass@k and intervals"
    );
    assert_eq!(a["n_total_trials"], b["n_total_trials"]);
    assert_eq!(a["coverage"]["scored"], b["coverage"]["scored"]);
    let lock = json(&merged.join("lock.json"));
    assert_eq!(lock["trials"].as_array().unwrap().len(), 20);
    assert_eq!(
        lock["dataset_digest"],
        json(&whole.join("lock.json"))["dataset_digest"]
    );
    assert!(
        !lock["invocation"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--shard"),
        "{lock}"
    );
    // compare reads the shards as one job: against the unsharded job, no difference.
    let output = runner()
        .arg("compare")
        .arg(&whole)
        .arg(&shards[0])
        .arg("--with-b")
        .arg(&shards[1])
        .arg("--with-b")
        .arg(&shards[2])
        .args(["--format", "json"])
        .output()
        .unwrap();
    let (out, _) = exited(&output, 0);
    let comparison: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(comparison["b"]["n_trials"], 20, "{comparison}");
    assert_eq!(comparison["difference"].as_f64(), Some(0.0), "{comparison}");
    assert_eq!(comparison["paired_tasks"], 10, "{comparison}");
}
