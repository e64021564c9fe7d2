//! Task schema 1.4's fields as Harbor 0.26 implements them, against the real Docker engine:
//! `[[verifier.collect]]` hooks in `main` and in a compose sidecar (the sidecar's while the
//! main container is frozen, so a process the agent left cannot change what it snapshots), an
//! artifact collected from a sidecar, `[task] version` in lock.json, and MCP server `headers`
//! reaching an installed agent through a generated variable, never a file or a record.

use std::path::Path;
use std::time::Duration;

use crate::step_phases::fixture;
use crate::support::{Job, ensure_base_image, exception, reward, runner};

#[test]
fn collect_hooks_snapshot_a_sidecar_while_the_agents_leftovers_are_frozen() {
    let (_jobs, job) = crate::compose::run(&fixture("collect-hooks"), "oracle");
    let results = job.trial_results();
    let (name, result) = &results[0];
    assert_eq!(reward(result), Some(1.0), "{result:#}");
    // Failing, timed-out and dangling hooks are warnings, as in Harbor.
    assert_eq!(exception(result), None, "{}", result["exception_info"]);
    let left: Vec<&str> = result["agent_leftover_processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["command"].as_str())
        .collect();
    assert!(
        left.iter().any(|c| c.contains("bump.py")),
        "the bumper was still running: {left:?}"
    );

    assert_collected_as_the_fixture_says(&job.dir.join(name), "the bumper ran before the freeze");
    // A trial streams every command's output into trial.log: the sidecar's snapshot printed
    // before the thaw, the failing hook's stderr.
    let log = job.trial_file(name, "trial.log");
    let snapshot = log.find("snapshot: ").expect("the snapshot's output");
    assert!(snapshot < log.find("main service thawed").unwrap(), "{log}");
    assert!(log.contains("failing-hook-output\n"), "{log}");
    let lock = job.json("lock.json");
    assert_eq!(lock["trials"][0]["task"]["version"], "1.2.3", "{lock:#}");
}

/// What `collect-hooks`' collection leaves in a trial's (or a `runner serve` episode's) dir:
/// main's hook output, the sidecar's two reads of its counter (equal, as main was frozen
/// between them; above 5, as `why_counted` says), the manifest of both passes, and in
/// `trial.log` main's hooks, the freeze, the sidecar's hooks and the thaw in that order, with
/// the failing, timed-out and dangling hooks as warnings.
pub(crate) fn assert_collected_as_the_fixture_says(dir: &Path, why_counted: &str) {
    let read = |rel: &str| {
        let path = dir.join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let counts: Vec<u64> = read("artifacts/counter/counts.txt")
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert!(counts[0] > 5, "{why_counted}: {counts:?}");
    assert_eq!(
        counts[0], counts[1],
        "a leftover changed the sidecar's state"
    );
    assert_eq!(read("artifacts/main-hook.txt"), "main hook ran as nobody\n");
    assert_eq!(
        testkit::records::artifact_manifest(&dir.join("artifacts")),
        [
            ["/logs/artifacts", "artifacts", "directory", "empty"],
            [
                "/tmp/main-hook.txt",
                "artifacts/main-hook.txt",
                "file",
                "ok"
            ],
            [
                "/snap/counts.txt",
                "artifacts/counter/counts.txt",
                "file",
                "ok"
            ],
        ]
    );

    let log = read("trial.log");
    let at = |needle: &str| {
        log.find(needle)
            .unwrap_or_else(|| panic!("trial.log lacks {needle:?}:\n{log}"))
    };
    // Main's hooks, then the freeze, the sidecar's hooks, and the thaw, in that order.
    assert!(at("collect hook 0 in service \"main\"") < at("main service frozen"));
    assert!(at("main service frozen") < at("collect hook 2 in service \"counter\""));
    at("main service thawed");
    at(
        "warning: collect hook 1 in service \"main\" (\"echo failing-hook-output >&2; exit 3\") exited with code Some(3)",
    );
    at("warning: collect hook 3 in service \"counter\" (\"sleep 30\") timed out after 1 s");
    at("warning: collect hook 4 in service \"ghost\" (\"true\") did not run");
}

#[test]
fn schema_1_4_fields_load_without_unknown_key_warnings_and_bad_ones_are_refused_by_field() {
    // `run` prints the load's warnings; `--dry-run` starts nothing. (Before schema 1.4's
    // fields were read, this said "`verifier.collect` is not a known task.toml key".)
    for name in ["collect-hooks", "mcp-headers"] {
        let jobs = tempfile::tempdir().unwrap();
        let out = runner()
            .args(["run", "--dry-run", "--agent", "oracle", "--jobs-dir"])
            .arg(jobs.path())
            .arg("--path")
            .arg(fixture(name))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            !stderr.contains("not a known task.toml key"),
            "{name}: {stderr}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("bad");
    testkit::files::copy_dir(&fixture("mcp-headers"), &task);
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let toml = toml.replace("Bearer ${NOTES_TOKEN}", "Bearer literal-secret");
    std::fs::write(task.join("task.toml"), toml).unwrap();
    let out = runner()
        .args(["tasks", "digest"])
        .arg(&task)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("task.toml")
            && stderr.contains("environment.mcp_servers[0].headers")
            && stderr.contains("must reference credentials as ${VAR}"),
        "{stderr}"
    );
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    testkit::files::snapshot(dir)
        .into_iter()
        .filter(|(_, bytes)| String::from_utf8_lossy(bytes).contains(needle))
        .map(|(path, _)| path.display().to_string())
        .collect()
}

#[test]
fn mcp_headers_reach_an_installed_agent_through_its_env_and_stay_out_of_the_records() {
    const TOKEN: &str = "tok-e2e-5f2a9c81d7";
    let agent = tempfile::tempdir().unwrap();
    let config = crate::steps::reference_agent_with_plans(agent.path());
    let jobs = tempfile::tempdir().unwrap();
    ensure_base_image();
    let output = runner()
        .args([
            "run",
            "--k",
            "1",
            "--allow-container-secrets",
            "--agent-env",
        ])
        .arg(format!("NOTES_TOKEN={TOKEN}"))
        .arg("--agent-config")
        .arg(&config)
        .arg("--jobs-dir")
        .arg(jobs.path())
        .arg("--path")
        .arg(fixture("mcp-headers"))
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains(TOKEN), "{stderr}");
    let job = Job::single_in(jobs.path());
    let (_, result) = job.trial_results().remove(0);
    assert_eq!(exception(&result), None, "{}", result["exception_info"]);
    assert_eq!(
        reward(&result),
        Some(1.0),
        "the config file held references and the agent's env their values"
    );
    assert_eq!(
        files_holding(&job.dir, TOKEN),
        Vec::<String>::new(),
        "the header's value is in no record"
    );
}

#[test]
fn each_steps_collection_runs_the_tasks_hooks_then_its_own() {
    let (_jobs, job) = crate::compose::run(&fixture("collect-steps"), "oracle");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{}", result["exception_info"]);
    for step in ["one", "two"] {
        let dir = format!("steps/{step}/artifacts");
        assert_eq!(
            job.trial_file(name, &format!("{dir}/task-hook.txt")),
            "task-hook\n"
        );
        assert_eq!(
            job.trial_file(name, &format!("{dir}/step-hook.txt")),
            format!("{step}\n"),
            "{step}'s own hook ran after its agent"
        );
    }
}

#[test]
fn harborignore_leaves_what_it_excludes_out_of_the_tests_and_solution_uploads() {
    // The tests score 1 only when /tests and /solution hold exactly what the rules keep.
    let (_jobs, job) = crate::compose::run(&fixture("harborignore"), "oracle");
    let results = job.trial_results();
    let (name, result) = &results[0];
    assert_eq!(
        reward(result),
        Some(1.0),
        "{}",
        job.trial_file(name, "verifier/test-stdout.txt")
    );
}
