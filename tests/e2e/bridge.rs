//! Models through the LLM bridge, end to end: the reference agent in model-driven mode runs
//! the examples against the scripted upstream (`testkit::upstream`, 127.0.0.1) through the
//! bridge and the in-container relay; token totals, the job budget stop, an undeclared model,
//! `validate-submission`, and a scan for the upstream key in containers, the job dir and logs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use testkit::upstream::{
    ANTHROPIC_KEY, Dialect, OPENAI_KEY, Script, ScriptedUpstream, Usage, solutions,
};

use crate::support::{
    Job, assert_scan_clean, ensure_base_image, exception, key_scan, reward, runner, workspace_root,
};

const MODEL: &str = "openai/gpt-scripted";
/// What every scripted answer reports.
const TURN: Usage = Usage {
    input: 120,
    cached: 20,
    cache_write: 0,
    output: 30,
};

/// The example whose agent timeout (5 s) leaves no time for the key scan.
const FIVE_SECONDS: &str = "/app/answer.txt";

/// Two turns per task: the commands (then the key scan), then an answer without a block.
fn script() -> Script {
    solutions()
        .into_iter()
        .fold(Script::new(), |script, (fragment, commands)| {
            let scan = if fragment == FIVE_SECONDS {
                String::new()
            } else {
                key_scan(&[OPENAI_KEY])
            };
            script.when(
                fragment,
                Dialect::BashBlock.replies(&format!("{commands}\n{scan}"), TURN),
            )
        })
}

fn model_config() -> PathBuf {
    workspace_root().join("adapter/agents/reference/agent-model.toml")
}

/// An `--llm-config` naming the scripted upstream; the key comes from the runner's own
/// OPENAI_API_KEY, as a user's would.
fn llm_config(dir: &Path, upstream: &ScriptedUpstream) -> PathBuf {
    let path = dir.join("llm.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[[providers]]
name = "openai"
api = "openai"
base_url = "{}"
key_env = "OPENAI_API_KEY"

[prices.models."{MODEL}"]
input_per_mtok = 2.0
cached_input_per_mtok = 0.5
output_per_mtok = 8.0
"#,
            upstream.openai_base_url()
        ),
    )
    .unwrap();
    path
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    job: Job,
    _dir: tempfile::TempDir,
}

/// `runner run` of the model-driven reference agent on `rel` with `extra` flags, the upstream
/// key in the runner's environment.
fn run(rel: &str, upstream: &ScriptedUpstream, extra: &[&str]) -> Ran {
    ensure_base_image();
    let dir = tempfile::tempdir().unwrap();
    let config = llm_config(dir.path(), upstream);
    let jobs = dir.path().join("jobs");
    let output = runner()
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .args(["run", "--job-name", "bridge"])
        .arg("--jobs-dir")
        .arg(&jobs)
        .arg("--path")
        .arg(workspace_root().join(rel))
        .arg("--agent-config")
        .arg(model_config())
        .args(["-m", MODEL])
        .arg("--llm-config")
        .arg(&config)
        .args(extra)
        .timeout(Duration::from_secs(1200))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    eprintln!("{stdout}\n{stderr}");
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout,
        stderr,
        job: Job::single_in(&jobs),
        _dir: dir,
    }
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    found.push(path);
                }
            }
        }
    }
    found
}

fn calls(job: &Job, trial: &str) -> Vec<Value> {
    job.trial_file(trial, "llm/calls.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_model_driven_reference_agent_solves_the_examples_through_the_bridge() {
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, script());
    let ran = run("tasks/examples", &upstream, &["-k", "5", "-n", "4"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let results = ran.job.trial_results();
    let tasks = std::fs::read_dir(workspace_root().join("tasks/examples"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("task.toml").is_file())
        .count();
    assert_eq!(results.len(), tasks * 5);
    let mut calls_made = 0;
    for (name, result) in &results {
        assert_eq!(reward(result), Some(1.0), "{name}: {result}");
        let agent = &result["agent_result"];
        // Two turns per agent run, each reporting TURN: the bridge's counts, from the upstream.
        // The two-step example runs the agent once per step.
        let steps: Vec<&str> = if name.starts_with("two-step-gate") {
            vec!["draft", "finalize"]
        } else {
            Vec::new()
        };
        let turns = 2 * steps.len().max(1) as u64;
        calls_made += turns as usize;
        assert_eq!(agent["n_input_tokens"], turns * TURN.input, "{name}");
        assert_eq!(agent["n_cache_tokens"], turns * TURN.cached, "{name}");
        assert_eq!(agent["n_output_tokens"], turns * TURN.output, "{name}");
        assert_eq!(agent["metadata"]["llm_bridge"]["models_called"][0], MODEL);
        let trajectory: Value =
            serde_json::from_str(&ran.job.trial_file(name, "agent/trajectory.json")).unwrap();
        let metrics = &trajectory["final_metrics"];
        assert_eq!(metrics["total_prompt_tokens"], turns * TURN.input, "{name}");
        assert_eq!(
            metrics["total_completion_tokens"],
            turns * TURN.output,
            "{name}"
        );
        let records = calls(&ran.job, name);
        assert_eq!(records.len() as u64, turns, "{name}");
        assert!(records.iter().all(|r| r["outcome"] == "ok"), "{name}");
        // The in-container scan found the key in no process env and no file.
        if !name.starts_with("slow-oracle") {
            let scans: Vec<String> = if steps.is_empty() {
                vec!["agent/key-scan.txt".into()]
            } else {
                steps
                    .iter()
                    .map(|step| format!("steps/{step}/agent/key-scan.txt"))
                    .collect()
            };
            for file in scans {
                assert_scan_clean(&ran.job.trial_file(name, &file), name);
            }
        }
        // The relay is stopped with the bridge, before the verifier: never an agent leftover.
        let leftovers = result["agent_leftover_processes"].to_string();
        assert!(!leftovers.contains("bridge-relay"), "{name}: {leftovers}");
    }
    assert_eq!(upstream.seen().len(), calls_made);
    let job_result = ran.job.json("result.json");
    let llm = &job_result["llm_bridge"];
    assert_eq!(llm["n_calls"], calls_made);
    assert_eq!(llm["n_input_tokens"], calls_made as u64 * TURN.input);
    assert_eq!(llm["models_called"][0], MODEL);
    assert!(
        ran.stdout
            .contains(&format!("LLM bridge: {calls_made} call(s)")),
        "{}",
        ran.stdout
    );
    let config = ran.job.json("config.json");
    assert_eq!(config["agents"][0]["model_name"], MODEL);
    // The key is nowhere in the job dir (records, bodies, logs) nor in the runner's output.
    assert_eq!(
        files_holding(&ran.job.dir, OPENAI_KEY),
        Vec::<PathBuf>::new()
    );
    assert!(!ran.stdout.contains(OPENAI_KEY) && !ran.stderr.contains(OPENAI_KEY));

    let output = runner()
        .arg("validate-submission")
        .arg(&ran.job.dir)
        .arg("--dataset")
        .arg(workspace_root().join("tasks/examples"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains(&format!("models called: {MODEL}")), "{out}");
}

#[test]
fn a_spent_job_budget_stops_scheduling_and_the_rest_are_not_run() {
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, script());
    // One turn spends 150 tokens: the first trial's first call crosses the job's 100.
    let ran = run(
        "tasks/examples/hello-file",
        &upstream,
        &["-k", "3", "-n", "1", "--job-max-tokens", "100"],
    );
    assert_eq!(ran.code, 3, "{}", ran.stderr);
    let results = ran.job.trial_results();
    assert_eq!(results.len(), 1, "later trials ran: {results:?}");
    let (name, result) = &results[0];
    // Its second call was refused for budget, which its result and trial.log say.
    let records = calls(&ran.job, name);
    assert_eq!(records.len(), 2);
    assert_eq!(records[1]["outcome"], "refused");
    let reason = result["agent_result"]["metadata"]["llm_bridge"]["budget_exhausted"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!reason.is_empty(), "{result}");
    let log = ran.job.trial_file(name, "trial.log");
    assert!(log.contains("calls were refused for budget"), "{log}");
    let job_result = ran.job.json("result.json");
    assert_eq!(job_result["coverage"]["not_run"], 2);
    assert_eq!(job_result["llm_bridge"]["n_trials_not_run_for_budget"], 2);
    assert!(
        ran.stdout.contains("the job's LLM budget ran out")
            && ran.stdout.contains("2 planned trial(s) were not run"),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_request_for_an_undeclared_model_is_refused() {
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, script());
    let ran = run(
        "tasks/examples/hello-file",
        &upstream,
        &["--ae", "REFERENCE_AGENT_MODEL=openai/gpt-undeclared"],
    );
    let results = ran.job.trial_results();
    let (name, result) = &results[0];
    // The agent ended in its own failed state (recorded, not an exception); the verifier
    // still scored what it left.
    assert_eq!(exception(result), None, "{result}");
    let records = calls(&ran.job, name);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["outcome"], "refused");
    assert_eq!(records[0]["status"], 403);
    let status = ran.job.trial_file(name, "agent/task-status.json");
    assert!(
        status.contains("\"failed\"") && status.contains("'openai/gpt-undeclared' is not allowed"),
        "{status}"
    );
    assert!(upstream.seen().is_empty(), "the refused call went upstream");
    assert_eq!(reward(result), Some(0.0));
    let _ = ran.code;
}
