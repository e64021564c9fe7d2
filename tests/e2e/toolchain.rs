//! Issue 29 item 1, through the real `runner` binary and Docker: agents that change the
//! programs the tests run (`tasks/hostile-toolchain`, each attack in a task's `solve.sh` under
//! `--agent oracle`, each test honest) get the reward their tests really give, with what they
//! changed recorded; ordinary trials beside them, and an agent's own new program, are
//! unaffected. The same dataset with `--agent-toolchain` shows the opt-out is real: the
//! forgeries work again there, and the records say so.

use std::sync::OnceLock;

use crate::oracle_run::OracleRun;
use crate::support::{exception, reward, workspace_root};

/// One run of the dataset with `extra` flags, of `tasks` only when some are named.
fn run_dataset(extra: &[&str], tasks: &[&str]) -> OracleRun {
    let mut args: Vec<String> = ["--n-concurrent", "4"].map(String::from).to_vec();
    args.extend(extra.iter().map(|a| a.to_string()));
    for task in tasks {
        args.push("-i".into());
        args.push(format!("hostile-toolchain/{task}"));
    }
    OracleRun::of("hostile-toolchain", "hostile-toolchain", "toolchain", &args)
}

fn default_run() -> &'static OracleRun {
    static RUN: OnceLock<OracleRun> = OnceLock::new();
    RUN.get_or_init(|| run_dataset(&[], &[]))
}

/// What the run recorded the agent changed of `task`'s toolchain.
fn changes(run: &OracleRun, task: &str) -> Vec<String> {
    let result = run.result(task);
    let changes = result["verifier_toolchain_changes"]
        .as_array()
        .unwrap_or_else(|| panic!("{task}: no verifier_toolchain_changes in {result:#}"));
    changes
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

fn trial_log(run: &OracleRun, task: &str) -> String {
    std::fs::read_to_string(run.dir(task).join("trial.log")).unwrap()
}

/// Each attack, and a path its recorded change must name.
const ATTACKS: &[(&str, &str)] = &[
    (
        "python3-replaced",
        "/usr/bin/python3.11: changed by the agent",
    ),
    ("python3-shim", "/usr/local/bin/python3: added by the agent"),
    ("bash-replaced", "/usr/bin/bash: changed by the agent"),
    ("bash-deleted", "/usr/bin/bash: removed by the agent"),
    (
        "bin-link",
        "/bin: the image's link was changed by the agent",
    ),
    ("ld-preload", "/etc/ld.so.preload: added by the agent"),
    (
        "sitecustomize",
        "/usr/lib/python3.11/sitecustomize.py: changed by the agent",
    ),
    (
        "pth-import",
        "zz-forge.pth: a .pth file the agent added or changed",
    ),
];

#[test]
fn every_toolchain_forgery_scores_what_the_tests_really_say_with_the_change_recorded() {
    let run = default_run();
    assert_eq!(run.code, Some(0), "the job failed:\n{}", run.stderr);
    for (task, change) in ATTACKS {
        let result = run.result(task);
        assert_eq!(
            reward(result),
            Some(0.0),
            "{task} forged its reward: {result:#}"
        );
        assert_eq!(
            exception(result),
            None,
            "{task} did not end scored: {result:#}"
        );
        assert_eq!(result["attempts"], 1, "{task} was retried");
        assert_eq!(result["verifier_isolation"]["toolchain"], "image", "{task}");
        let changes = changes(run, task);
        assert!(
            changes.iter().any(|c| c.contains(change)),
            "{task}: no change naming {change:?} in {changes:?}"
        );
        let log = trial_log(run, task);
        assert!(
            log.contains("the tests ran with the image's own") && log.contains(change),
            "{task}: trial.log does not show the change:\n{log}"
        );
    }
}

#[test]
fn a_shim_planted_on_path_while_the_tests_run_is_never_found_first() {
    let run = default_run();
    let result = run.result("python3-shim-racer");
    assert_eq!(
        reward(result),
        Some(0.0),
        "the racer forged its reward: {result:#}"
    );
    assert_eq!(exception(result), None, "{result:#}");
}

#[test]
fn an_agent_that_breaks_the_accounts_still_gets_its_tests_run_as_their_user() {
    // 70,000 groups for root: setgroups would refuse them, and the trial would be an
    // infrastructure error to retry; the tests' user comes from the image's accounts instead.
    let run = default_run();
    let result = run.result("group-flood");
    assert_eq!(reward(result), Some(0.0), "{result:#}");
    assert_eq!(exception(result), None, "{result:#}");
    assert_eq!(result["attempts"], 1);
}

#[test]
fn ordinary_agents_and_their_own_programs_are_unaffected() {
    let run = default_run();
    for task in ["ordinary", "own-tool"] {
        let result = run.result(task);
        assert_eq!(reward(result), Some(1.0), "{task}: {result:#}");
        assert_eq!(changes(run, task), Vec::<String>::new(), "{task}");
        assert!(
            trial_log(run, task).contains("the tests' programs and startup hooks are the image's"),
            "{task}"
        );
    }
}

#[test]
fn the_agent_toolchain_opt_out_runs_the_agents_programs_and_says_so() {
    let run = run_dataset(&["--agent-toolchain"], &["python3-shim", "ordinary"]);
    assert_eq!(run.code, Some(0), "the job failed:\n{}", run.stderr);
    let shim = run.result("python3-shim");
    // Harbor's behaviour, on purpose: the shim is found first and the test passes.
    assert_eq!(reward(shim), Some(1.0), "{shim:#}");
    assert_eq!(shim["verifier_isolation"]["toolchain"], "agent");
    assert!(changes(&run, "python3-shim")[0].contains("/usr/local/bin/python3"));
    assert!(trial_log(&run, "python3-shim").contains("the tests ran with the agent's"));
    assert_eq!(reward(run.result("ordinary")), Some(1.0));
    let job_config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            run.dirs["hostile-toolchain/ordinary"]
                .parent()
                .unwrap()
                .join("config.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(job_config["verifier"]["agent_toolchain"], true);
}

/// The pytest task of `tests/fixtures/pytest-conftest`, with pytest's wheels downloaded into
/// its build context (the offline base image has no pytest), as a one-task dataset.
fn pytest_dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("pytest-conftest");
    let fixture = workspace_root().join("tests/fixtures/pytest-conftest/task");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(&fixture)
        .arg(&task)
        .status()
        .unwrap();
    assert!(copied.success());
    let wheels = task.join("environment/wheels");
    let download = std::process::Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--quiet", "--dest"])
        .arg(&wheels)
        .args([
            "pytest==8.3.4",
            "pluggy==1.5.0",
            "iniconfig==2.0.0",
            "packaging==24.2",
        ])
        .output()
        .unwrap();
    assert!(
        download.status.success(),
        "downloading pytest's wheels from the package index failed: {}",
        String::from_utf8_lossy(&download.stderr)
    );
    dir
}

#[test]
fn a_planted_pytest_ini_and_conftest_cannot_pass_a_failing_pytest() {
    let dataset = pytest_dataset();
    for (extra, expected) in [(None, 0.0), (Some("--agent-toolchain"), 1.0)] {
        let flags: Vec<String> = extra.map(String::from).into_iter().collect();
        let run = OracleRun::at(dataset.path(), "", "pytest", &flags);
        assert_eq!(run.code, Some(0), "{extra:?}: {}", run.stderr);
        let result = run.results.values().next().expect("one trial");
        // With the agent's toolchain the hookwrapper really passes the failing test: the
        // probe is live, and the default defeats it.
        assert_eq!(reward(result), Some(expected), "{extra:?}: {result:#}");
        let changes = result["verifier_toolchain_changes"].to_string();
        for planted in ["/conftest.py", "/pytest.ini"] {
            assert!(changes.contains(planted), "{extra:?}: {changes}");
        }
    }
}

/// Issue 39 item 7: an honest agent is never accused. Every example task (one job, k = 1)
/// under the oracle records no toolchain change: in a multi-step task the second step's
/// verification meets the first step's pins (runner's own mounts of the image's programs,
/// `/etc/ld.so.preload`), which are not the agent's doing.
#[test]
fn no_example_task_under_the_oracle_records_a_toolchain_change() {
    let flags = ["--n-concurrent", "4"].map(String::from);
    let run = OracleRun::of("examples", "examples", "examples-toolchain", &flags);
    let tasks: Vec<_> = std::fs::read_dir(workspace_root().join("tasks/examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("task.toml").is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    assert!(tasks.len() >= 10, "{tasks:?}");
    assert_eq!(run.results.len(), tasks.len(), "{}", run.stderr);
    for task in &tasks {
        let result = run.result(task);
        let recorded = result.get("verifier_toolchain_changes");
        assert!(
            recorded.is_none_or(|c| c.as_array().is_some_and(Vec::is_empty)),
            "{task}: an honest oracle trial was accused: {recorded:?}"
        );
        let log = trial_log(&run, task);
        assert!(
            !log.contains("of the tests' programs or startup hooks; the tests ran with"),
            "{task}: trial.log accuses the oracle:\n{log}"
        );
    }
    // The multi-step task was checked, in the jail, after each step: an empty list, not none.
    let gate = run.result("two-step-gate");
    assert_eq!(reward(gate), Some(1.0), "{gate:#}");
    assert_eq!(
        gate["verifier_toolchain_changes"],
        serde_json::json!([]),
        "{gate:#}"
    );
    assert_eq!(gate["verifier_isolation"]["toolchain"], "image", "{gate:#}");
    let log = trial_log(&run, "two-step-gate");
    assert_eq!(
        log.matches("the tests' programs and startup hooks are the image's")
            .count(),
        2,
        "both steps' verifications checked the toolchain:\n{log}"
    );
}
