//! Declared models and their keys, through `runner run`: a declared model whose provider has no
//! key is refused before anything is planned or any engine is asked (exit 2, naming the model,
//! the provider, the variable and the flags); an agent config's `models` list bounds `-m`, is
//! what the bridge allows, and is recorded in `config.json`; a call of any other model is
//! refused by the bridge.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use testkit::upstream::{ANTHROPIC_KEY, OPENAI_KEY, Script, ScriptedUpstream};

use crate::support::{
    chat_agent, exception, reward, run_hello_file, run_hello_file_on, workspace_root,
    write_agent_config,
};

/// A `runner run` of `config` on hello-file with every provider variable of the runner's own
/// environment removed and the engine pointed at a socket that does not exist, so reaching the
/// engine would be an error of its own.
fn run_without_keys(jobs: &Path, config: &Path, extra: &[&str]) -> (i32, String) {
    let output = run_hello_file(jobs, config)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), stderr)
}

#[test]
fn a_declared_model_without_a_key_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let mini = workspace_root().join("adapter/agents/mini-swe-agent/agent.toml");
    let (code, stderr) = run_without_keys(&jobs, &mini, &["-m", "openai/gpt-4.1-mini"]);
    assert_eq!(code, 2, "bad input: {stderr}");
    for needle in [
        "-m/--model openai/gpt-4.1-mini",
        "no key for provider 'openai'",
        "OPENAI_API_KEY is not set",
        "--llm-key-file openai=FILE",
        "--llm-config",
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing from: {stderr}");
    }
    assert!(!stderr.contains("engine"), "the engine was asked: {stderr}");
    assert!(!jobs.exists(), "a job dir was made for a refused run");

    // A model the agent config declares (no -m) is checked the same way, and named as the
    // config's.
    let config = write_agent_config(
        dir.path(),
        "name = \"lister\"\nmodels = [\"anthropic/claude-scripted\"]\n[run]\ncommand = \"true\"\n",
    );
    let (code, stderr) = run_without_keys(&jobs, &config, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("model anthropic/claude-scripted (declared by the agent config)")
            && stderr.contains("ANTHROPIC_API_KEY is not set")
            && stderr.contains("--llm-key-file anthropic=FILE"),
        "{stderr}"
    );
    assert!(!jobs.exists());
}

/// A command agent that may call two models: it calls the second (allowed) and a third (not
/// declared), printing each status, then solves hello-file.
fn two_models_agent() -> String {
    chat_agent(
        "two-models",
        &["openai/gpt-first", "openai/gpt-second"],
        r#"print("second", ask("openai/gpt-second", "hi"))
print("third", ask("openai/gpt-third", "hi"))
"#,
    )
}

#[test]
fn an_agent_configs_models_bound_m_and_are_what_the_bridge_allows() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let config = write_agent_config(dir.path(), &two_models_agent());
    // -m outside the list is refused, naming the list and the file.
    let (code, stderr) = run_without_keys(&jobs, &config, &["-m", "openai/gpt-third"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("-m/--model openai/gpt-third")
            && stderr.contains("`models` = [openai/gpt-first, openai/gpt-second]")
            && stderr.contains(&config.display().to_string()),
        "{stderr}"
    );
    assert!(!jobs.exists());

    // Without -m both listed models are declared; a third is refused by the bridge.
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, Script::new());
    let job = run_hello_file_on(&jobs, &config, &upstream, &[]);
    let agent = &job.json("config.json")["agents"][0];
    assert_eq!(agent["model_name"], "openai/gpt-first", "{agent}");
    assert_eq!(
        agent["models"],
        serde_json::json!(["openai/gpt-first", "openai/gpt-second"])
    );
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{result}");
    assert_eq!(reward(result), Some(1.0), "{result}");
    assert_eq!(
        job.trial_file(name, "agent/command/stdout.txt"),
        "second 200\nthird 403\n"
    );
    let calls: Vec<Value> = job
        .trial_file(name, "llm/calls.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outcomes: Vec<&Value> = calls.iter().map(|c| &c["outcome"]).collect();
    assert_eq!(outcomes, ["ok", "refused"]);
    assert_eq!(
        result["agent_result"]["metadata"]["llm_bridge"]["models_called"],
        serde_json::json!(["openai/gpt-second"])
    );
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "only the declared model went upstream");
    // … by the name the provider knows, without the bridge's provider prefix.
    assert_eq!(seen[0].body["model"], "gpt-second");
}
