//! Issue 9's runtime defects, through the real `runner` binary and Docker: the hostile dataset
//! (`tasks/hostile`) runs once under `--agent oracle` with small caps, and each test checks one
//! promise against that job: forgers (root, `nobody`, the verifier's own user, through
//! `/proc/<pid>/root`, rewriting `/tests`, reaching the tests after they switch user) get the reward their tests write, ordinary trials beside them score 1 with their
//! services reachable, every hostile trial ends with a typed exception or its honest reward,
//! the limits are applied and recorded, the runner's peak RSS and the job directory stay
//! bounded, planted links and FIFOs never reach the host, and no container is left.

use std::path::Path;
use std::sync::OnceLock;

use crate::oracle_run::{OracleRun, flags};
use crate::support::{containers_with_label, exception, reward};

/// The caps the job runs under (small, so the job stays fast and its directory small).
const PIDS_LIMIT: u32 = 256;
const DOWNLOAD_CAP_MB: u64 = 64;
const TRIAL_LOG_CAP_MB: u64 = 8;
/// The verifier's own output budget in the Docker backend, at most the download cap.
const VERIFIER_CAP_MB: u64 = DOWNLOAD_CAP_MB;

/// The one run of the hostile dataset every test here looks at.
fn hostile() -> &'static OracleRun {
    static RUN: OnceLock<OracleRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let caps = flags(&[
            ("--n-concurrent", "4".to_owned()),
            ("--pids-limit", PIDS_LIMIT.to_string()),
            ("--max-download-mb", DOWNLOAD_CAP_MB.to_string()),
            ("--max-trial-log-mb", TRIAL_LOG_CAP_MB.to_string()),
        ]);
        OracleRun::of("hostile", "hostile", "hostile", &caps)
    })
}

fn leftover_commands(result: &serde_json::Value) -> Vec<String> {
    result["agent_leftover_processes"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|p| p["command"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_reward_forger_gets_the_reward_its_tests_write() {
    let run = hostile();
    for task in [
        "forger-root",
        "forger-nobody",
        "forger-same-user",
        "proc-root-forger",
        "tests-rewriter",
        "user-switch-forger",
    ] {
        let result = run.result(task);
        assert_eq!(reward(result), Some(0.0), "{task}: {result:#}");
        assert_eq!(exception(result), None, "{task}: {result:#}");
        assert_eq!(
            result["verifier_isolation"]["isolated"].as_bool(),
            Some(true),
            "{task}: {result:#}"
        );
    }
    // The forger is listed, with its user, as a process the agent left running.
    for (task, user) in [("forger-root", "root"), ("forger-nobody", "nobody")] {
        let result = run.result(task);
        let forger = result["agent_leftover_processes"]
            .as_array()
            .and_then(|list| {
                list.iter().find(|p| {
                    p["command"]
                        .as_str()
                        .is_some_and(|c| c.contains("/logs/verifier/reward.json"))
                })
            })
            .unwrap_or_else(|| panic!("{task}: the forger is not listed: {result:#}"));
        assert_eq!(forger["user"], user, "{task}");
        assert!(forger["pid"].as_u64().unwrap() > 1);
        let log = run.job.trial_file(
            run.dir(task).file_name().unwrap().to_str().unwrap(),
            "trial.log",
        );
        assert!(
            log.contains("left running by the agent when verification started")
                && log.contains("/logs/verifier/reward.json"),
            "{task}: trial.log does not list the forger"
        );
    }
}

#[test]
fn ordinary_trials_score_one_and_their_services_stay_reachable() {
    let run = hostile();
    for task in ["ordinary", "ordinary-service", "read-tests"] {
        let result = run.result(task);
        assert_eq!(reward(result), Some(1.0), "{task}: {result:#}");
        assert_eq!(exception(result), None, "{task}: {result:#}");
    }
    // The server the agent left is listed, and the isolated tests reached it.
    let service = run.result("ordinary-service");
    assert!(
        leftover_commands(service)
            .iter()
            .any(|c| c.contains("http.server 8765")),
        "{service:#}"
    );
    assert_eq!(
        service["verifier_isolation"]["isolated"].as_bool(),
        Some(true)
    );
}

#[test]
fn every_hostile_trial_ends_with_a_typed_exception_or_its_honest_reward() {
    let run = hostile();
    assert_eq!(
        run.results.len(),
        15,
        "every planned trial is recorded: {:?}",
        run.results.keys()
    );
    // Every hostile trial has a result (a reward, or the agent's error counted as 0): none
    // turned its trial into missing data, so the run exits 0, not 3.
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for (task, result) in &run.results {
        assert_ne!(result["outcome"], "infra_error", "{task}: {result:#}");
        if let Some(kind) = exception(result) {
            assert_ne!(kind, "RunnerError", "{task}: {result:#}");
        }
    }
    let disk = run.result("disk-fill");
    assert_eq!(
        exception(disk).as_deref(),
        Some("StorageLimitExceededError"),
        "{disk:#}"
    );
    assert_eq!(disk["config"]["limits"]["storage_mb"], 128);
    assert_eq!(
        disk["config"]["limits"]["storage_enforcement"], "watched",
        "this engine's storage driver cannot enforce a quota"
    );
    // Stopping its own container is the agent's failure, not a retried infrastructure error.
    let killed = run.result("kill-pid1");
    assert_eq!(
        exception(killed).as_deref(),
        Some("VerifierKilledError"),
        "{killed:#}"
    );
    assert_eq!(killed["attempts"], 1, "{killed:#}");
    assert_eq!(reward(killed), None);
    for task in ["endless-output", "fork-bomb"] {
        let result = run.result(task);
        assert_eq!(
            exception(result).as_deref(),
            Some("AgentTimeoutError"),
            "{task}: {result:#}"
        );
        // The tests still ran, after the agent's deadline, and wrote their honest 1.
        assert_eq!(reward(result), Some(1.0), "{task}: {result:#}");
    }
    for task in ["huge-artifact", "plant-links"] {
        assert_eq!(reward(run.result(task)), Some(1.0), "{task}");
    }
}

#[test]
fn the_limits_are_applied_and_recorded_in_every_trial_config() {
    let run = hostile();
    let seen = std::fs::read_to_string(run.dir("fork-bomb").join("agent/pids-max.txt")).unwrap();
    assert_eq!(
        seen.trim(),
        PIDS_LIMIT.to_string(),
        "the container's pids.max"
    );
    for (task, result) in &run.results {
        let limits = &result["config"]["limits"];
        assert_eq!(limits["pids_limit"], PIDS_LIMIT, "{task}");
        assert_eq!(limits["memory_mb"], 512, "{task}");
        assert_eq!(limits["memory_swap_mb"], limits["memory_mb"], "{task}");
        assert_eq!(
            limits["download_cap_bytes"],
            DOWNLOAD_CAP_MB << 20,
            "{task}"
        );
        assert_eq!(
            limits["trial_log_cap_bytes"],
            TRIAL_LOG_CAP_MB << 20,
            "{task}"
        );
        let dir = run.dir(task.trim_start_matches("hostile/"));
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        assert_eq!(
            &config["limits"], limits,
            "{task}: config.json and result agree"
        );
    }
}

fn tree_bytes(path: &Path) -> u64 {
    let meta = std::fs::symlink_metadata(path).unwrap();
    if meta.is_dir() {
        std::fs::read_dir(path)
            .unwrap()
            .map(|e| tree_bytes(&e.unwrap().path()))
            .sum()
    } else {
        meta.len()
    }
}

#[test]
fn the_runner_stays_small_and_the_job_dir_stays_under_its_caps() {
    let run = hostile();
    assert!(
        run.peak_rss_mib < 300.0,
        "peak RSS {:.0} MiB",
        run.peak_rss_mib
    );
    let mib = |bytes: u64| bytes >> 20;
    for task in run.results.keys() {
        let dir = run.dir(task.trim_start_matches("hostile/"));
        let downloads = tree_bytes(&dir.join("agent")) + tree_bytes(&dir.join("artifacts"));
        // A marker line may follow the cut.
        assert!(
            downloads <= (DOWNLOAD_CAP_MB << 20) + 4096,
            "{task}: {} MiB downloaded",
            mib(downloads)
        );
        assert!(tree_bytes(&dir.join("verifier")) <= VERIFIER_CAP_MB << 20);
        assert!(
            tree_bytes(&dir.join("trial.log")) <= (TRIAL_LOG_CAP_MB << 20) + (1 << 20),
            "{task}: trial.log"
        );
    }
    let truncated = |task: &str| -> Vec<String> {
        run.result(task)["truncated_outputs"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|t| t["path"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let endless = truncated("endless-output");
    assert!(
        endless.iter().any(|p| p.starts_with("agent/")),
        "{endless:?}"
    );
    assert!(endless.iter().any(|p| p == "trial.log"), "{endless:?}");
    assert_eq!(truncated("huge-artifact"), ["artifacts/huge.bin"]);
    let cut = std::fs::read(run.dir("huge-artifact").join("artifacts/huge.bin")).unwrap();
    let tail = String::from_utf8_lossy(&cut[cut.len().saturating_sub(200)..]).into_owned();
    assert!(tail.contains("download cap"), "no marker line: {tail}");
    let log = std::fs::read_to_string(run.dir("endless-output").join("trial.log")).unwrap();
    assert!(
        log.contains("trial.log reached its cap"),
        "no marker in trial.log"
    );
}

#[test]
fn planted_links_and_fifos_never_reach_the_host() {
    let run = hostile();
    let mut found = Vec::new();
    let mut stack = vec![run.job.dir.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                stack.push(path);
            } else if !kind.is_file() {
                found.push(path);
            }
        }
    }
    assert!(
        found.is_empty(),
        "non-regular files in the job dir: {found:?}"
    );
    let planted = run.dir("plant-links");
    assert_eq!(
        std::fs::read_to_string(planted.join("verifier/reward.txt")).unwrap(),
        "1\n"
    );
}

#[test]
fn no_container_is_left_behind() {
    let run = hostile();
    let job_id = run.job.job_id();
    assert_eq!(
        containers_with_label(&format!("runner.job={job_id}")),
        Vec::<String>::new()
    );
}
