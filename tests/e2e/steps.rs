//! Multi-step tasks and artifacts against the real Docker engine: the examples
//! `two-step-gate` (two steps, a `min_reward` gate, a step workdir with `setup.sh`) and
//! `artifacts` (declared artifacts with Harbor's manifest), oracle 1 and nop 0.

use std::time::Duration;

use crate::support::{
    Job, containers_with_label, ensure_base_image, exception, reward, runner, workspace_root,
};

/// Runs `agent` once on the example `task` into a fresh jobs dir.
fn run_example(task: &str, agent: &str) -> (tempfile::TempDir, Job) {
    let jobs = tempfile::tempdir().unwrap();
    ensure_base_image();
    let output = runner()
        .args(["run", "--agent", agent, "--k", "1", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(workspace_root().join("tasks/examples").join(task))
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{task} with {agent}: every trial scored"
    );
    let job = Job::single_in(jobs.path());
    assert!(
        containers_with_label(&format!("runner.job={}", job.job_id())).is_empty(),
        "no container left behind"
    );
    (jobs, job)
}

/// Each step's name and reward.
pub(crate) fn step_summary(result: &serde_json::Value) -> Vec<(String, Option<f64>)> {
    result["step_results"]
        .as_array()
        .expect("step_results")
        .iter()
        .map(|s| {
            (
                s["step_name"].as_str().unwrap().to_owned(),
                s["verifier_result"]["rewards"]["reward"].as_f64(),
            )
        })
        .collect()
}

#[test]
fn the_oracle_passes_both_steps_of_the_gated_task() {
    let (_jobs, job) = run_example("two-step-gate", "oracle");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(
        exception(result),
        None,
        "{name}: {}",
        result["exception_info"]
    );
    assert_eq!(
        step_summary(result),
        [
            ("draft".to_owned(), Some(1.0)),
            ("finalize".to_owned(), Some(1.0))
        ]
    );
    assert_eq!(reward(result), Some(1.0));
    for step in ["draft", "finalize"] {
        assert_eq!(
            job.trial_file(name, &format!("steps/{step}/verifier/reward.txt"))
                .trim(),
            "1"
        );
        let manifest = job.trial_file(name, &format!("steps/{step}/artifacts/manifest.json"));
        assert!(
            manifest.contains("\"/logs/artifacts\""),
            "{step}: {manifest}"
        );
    }
    let step = &result["step_results"][1];
    assert!(step["agent_execution"]["started_at"].is_string());
    assert!(step["verifier"]["finished_at"].is_string());

    // `runner view` shows each step: its instruction (recorded by the run), rewards, timings
    // relative to the trial's start, and files, instead of the one-step page's "No …" notes.
    let report = crate::support::view_report(&job.dir);
    let page = std::fs::read_dir(report.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .find_map(|dir| std::fs::read_to_string(dir.path().join(format!("{name}.html"))).ok())
        .expect("the trial's page");
    assert_eq!(
        page.matches("<section class=\"step-section\"").count(),
        2,
        "{page}"
    );
    assert!(page.contains("Step 1 of 2 (draft)"), "{page}");
    assert!(page.contains("Step 2 of 2 (finalize)"), "{page}");
    assert!(
        page.contains("data-file=\"steps/finalize/verifier/test-stdout.txt\""),
        "{page}"
    );
    assert!(!page.contains("No verifier/test-stdout.txt"), "{page}");
    assert!(!page.contains("No agent/trajectory.json"), "{page}");
    let started = result["step_results"][0]["agent_execution"]["started_at"]
        .as_str()
        .unwrap();
    assert!(
        page.contains(&format!("<span title=\"{started}\">+")),
        "phase times relative to the trial's start, the recorded time in the title: {page}"
    );
}

#[test]
fn nop_fails_the_first_step_and_the_gate_skips_the_second() {
    let (_jobs, job) = run_example("two-step-gate", "nop");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(
        exception(result),
        None,
        "{name}: a missed gate is not an error"
    );
    assert_eq!(step_summary(result), [("draft".to_owned(), Some(0.0))]);
    assert_eq!(reward(result), Some(0.0));
    assert!(!job.dir.join(name).join("steps/finalize").exists());
}

#[test]
fn the_oracles_artifacts_are_collected_with_harbors_manifest_and_nop_scores_zero() {
    let (_jobs, job) = run_example("artifacts", "oracle");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(reward(result), Some(1.0), "{}", result["exception_info"]);
    assert_eq!(job.trial_file(name, "artifacts/report.txt").trim(), "3");
    assert!(
        job.trial_file(name, "artifacts/logs/run.log")
            .contains("counted")
    );
    assert!(
        !job.dir
            .join(name)
            .join("artifacts/logs/scratch.tmp")
            .exists(),
        "excluded by the task's pattern"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&job.trial_file(name, "artifacts/manifest.json")).unwrap();
    assert_eq!(
        manifest,
        serde_json::json!([
            {"source": "/logs/artifacts", "destination": "artifacts", "type": "directory", "status": "empty"},
            {"source": "/app/report.txt", "destination": "artifacts/report.txt", "type": "file", "status": "ok"},
            {"source": "/app/logs", "destination": "artifacts/logs", "type": "directory", "status": "ok"},
        ])
    );

    let (_jobs, job) = run_example("artifacts", "nop");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(reward(result), Some(0.0));
    let manifest = job.trial_file(name, "artifacts/manifest.json");
    assert!(
        manifest.contains("\"failed\""),
        "nothing to collect: {manifest}"
    );
}

/// The reference agent copied into `dir` with plan entries for the multi-step example (by
/// each step's instruction), the skills/MCP fixture and the MCP headers fixture, and an
/// `[mcp] config_file`.
pub(crate) fn reference_agent_with_plans(dir: &std::path::Path) -> std::path::PathBuf {
    let source = workspace_root().join("adapter/agents/reference");
    testkit::files::copy_dir(&source, dir);
    let plan_path = dir.join("src/plan.json");
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    let step = |thought: &str, command: &str| serde_json::json!([{"thought": thought, "command": command}]);
    plan["two-step-gate#draft"] = serde_json::json!({
        "match": "Step 1 of 2 (draft)",
        "steps": step("Write the draft.", "echo draft > /app/draft.txt"),
    });
    plan["two-step-gate#finalize"] = serde_json::json!({
        "match": "Step 2 of 2 (finalize)",
        "steps": step(
            "Upper-case the draft and add the version.",
            "printf '%s %s\\n' \"$(tr a-z A-Z < /app/draft.txt)\" \"$(cat /app/version.txt)\" > /app/final.txt",
        ),
    });
    plan["fixtures/skills-mcp"] = serde_json::json!({
        "steps": step(
            "Write down the skills and MCP servers I was given.",
            "{ ls \"$HOME/.agents/skills\" | sed 's/^/skill: /'; echo \"$MCP_SERVERS_JSON\" | python3 -m json.tool; cat \"$HOME/.agents/mcp.json\"; } > /app/seen.txt; cat /app/seen.txt",
        ),
    });
    // Resolves the config file's header references from the server's env, printing nothing
    // (the trajectory records a command's output).
    plan["fixtures/mcp-headers"] = serde_json::json!({
        "steps": step(
            "Write down the MCP headers I was given.",
            r#"cp "$HOME/.agents/mcp.json" /app/mcp.json && python3 -c 'import json, os, re; h = json.load(open("/app/mcp.json"))["mcpServers"]["notes"]["headers"]; json.dump({k: re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), "UNSET"), v) for k, v in h.items()}, open("/app/headers.json", "w"))'"#,
        ),
    });
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let config = dir.join("agent.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[mcp]\nconfig_file = \"$HOME/.agents/mcp.json\"\n");
    std::fs::write(&config, text).unwrap();
    config
}

/// Runs the reference agent with its plans (see [`reference_agent_with_plans`]) once on the task
/// at `rel` (relative to the workspace); the job must score, and its trial end without an
/// exception. The jobs dir, the job, and the trial's name and result.
fn run_installed(rel: &str) -> (tempfile::TempDir, Job, String, serde_json::Value) {
    let agent = tempfile::tempdir().unwrap();
    let config = reference_agent_with_plans(agent.path());
    let jobs = tempfile::tempdir().unwrap();
    ensure_base_image();
    let output = runner()
        .args(["run", "--k", "1", "--agent-config"])
        .arg(&config)
        .arg("--jobs-dir")
        .arg(jobs.path())
        .arg("--path")
        .arg(workspace_root().join(rel))
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{rel}: scored");
    let job = Job::single_in(jobs.path());
    let (name, result) = job.trial_results().remove(0);
    assert_eq!(exception(&result), None, "{}", result["exception_info"]);
    (jobs, job, name, result)
}

#[test]
fn an_installed_agent_gets_each_steps_instruction_and_the_trial_one_joined_trajectory() {
    let (_jobs, job, name, result) = run_installed("tasks/examples/two-step-gate");
    assert_eq!(
        step_summary(&result),
        [
            ("draft".to_owned(), Some(1.0)),
            ("finalize".to_owned(), Some(1.0))
        ]
    );
    for (step, says) in [("draft", "Step 1 of 2"), ("finalize", "Step 2 of 2")] {
        let sent = job.trial_file(&name, &format!("steps/{step}/agent/instruction.txt"));
        assert!(sent.contains(says), "{step}: {sent}");
        let own = job
            .dir
            .join(&name)
            .join(format!("steps/{step}/agent/trajectory.json"));
        assert!(
            tasks::atif::validate_file(&own).unwrap().is_empty(),
            "{step}"
        );
    }
    let joined = job.dir.join(&name).join("agent/trajectory.json");
    assert!(tasks::atif::validate_file(&joined).unwrap().is_empty());
    let joined: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(joined).unwrap()).unwrap();
    let ranges = joined["extra"]["steps"].as_array().unwrap();
    assert_eq!(ranges.len(), 2);
    assert_eq!(ranges[1]["name"], "finalize");
    assert_eq!(
        ranges[1]["last_step_id"].as_u64().unwrap() as usize,
        joined["steps"].as_array().unwrap().len()
    );
}

#[test]
fn the_tasks_skills_and_mcp_servers_reach_an_installed_agent() {
    let (_jobs, _job, _, result) = run_installed("tests/fixtures/tasks/skills-mcp");
    assert_eq!(
        reward(&result),
        Some(1.0),
        "the agent saw the skill and both server shapes"
    );
}
