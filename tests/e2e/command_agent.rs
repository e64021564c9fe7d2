//! Command-style agents (`[run] command`) against the real Docker engine: placeholders and
//! `--ak` kwargs reach the command, its output is captured into `agent/command/`, the trace
//! it names is collected and converted (mini-swe-agent's format to ATIF, token counts into
//! `agent_result`), the agent deadline kills it, config mistakes are refused by field, and
//! mini-swe-agent from the package index, in its default tool-calling mode, solves an example
//! through the LLM bridge against the scripted upstream, its trajectory counting exactly the
//! script's tokens.

use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::upstream::{
    ANTHROPIC_KEY, Dialect, OPENAI_KEY, Reply, Script, ScriptedUpstream, Usage, solutions,
};

use crate::installed::run;
use crate::support::{
    Job, containers_with_label, ensure_base_image, exception, reward, run_hello_file,
    workspace_root, write_agent_config,
};

/// Writes `text` as `agent.toml` in `dir`; returns its path.
/// A mini-swe-agent trajectory (its own format) that the shell agent below writes: two model
/// turns with 120 + 80 prompt tokens, 30 + 12 completion tokens and 40 cached.
const MINI_TRAJECTORY: &str = r#"{"trajectory_format": "mini-swe-agent-1.1",
 "info": {"mini_version": "2.4.6", "exit_status": "Submitted", "model_stats": {"instance_cost": 0.0},
          "config": {"model": {"model_name": "openai/scripted-model"}}},
 "messages": [
  {"role": "system", "content": "You are a helpful assistant."},
  {"role": "user", "content": "Create the file"},
  {"role": "assistant", "content": "THOUGHT: write it", "extra": {"response": {"usage":
     {"prompt_tokens": 120, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 40}}}}},
  {"role": "user", "content": "<returncode>0</returncode>"},
  {"role": "assistant", "content": "THOUGHT: done", "extra": {"response": {"usage":
     {"prompt_tokens": 80, "completion_tokens": 12}}}},
  {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}
 ]}"#;

/// A command agent that solves `examples/hello-file` with a shell command, printing what its
/// placeholders became and writing a mini-swe-agent trace.
fn shell_agent_config() -> String {
    format!(
        r#"name = "shell-agent"
version = "0.1"
model_name = "openai/scripted-model"
[kwargs]
greeting = "not the greeting the task wants"
[run]
command = '''
echo model={{model}} provider={{model_provider}} name={{model_name}} workdir={{workdir}} timeout={{agent_timeout_sec}} logs={{logs_dir}}
echo "a line for stderr" >&2
grep -q hello.txt {{instruction_file}}
printf '%s\n' {{kwargs.greeting}} > hello.txt
mkdir -p /tmp/shell-agent
cat > /tmp/shell-agent/mini.json <<'JSON'
{MINI_TRAJECTORY}
JSON
'''
[traces]
files = ["/tmp/shell-agent/mini.json"]
[trajectory]
format = "mini-swe-agent"
file = "mini.json"
"#
    )
}

#[test]
fn a_command_agent_gets_its_placeholders_and_kwargs_and_its_trace_is_converted() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_agent_config(dir.path(), &shell_agent_config());
    let jobs = dir.path().join("jobs");
    let (code, _) = run(
        &jobs,
        "tasks/examples/hello-file",
        &config,
        // No -m: the model comes from the config (with -m the LLM bridge would serve it, and
        // this test has no upstream; the bridge test below has one).
        &["--ak", "greeting=Hello, world!", "--ak", "attempt=2"],
    );
    assert_eq!(code, 0);
    let job = Job::single_in(&jobs);
    let agent = &job.json("config.json")["agents"][0];
    assert_eq!(agent["name"], "shell-agent");
    assert_eq!(agent["model_name"], "openai/scripted-model");
    assert_eq!(agent["kwargs"]["greeting"], "Hello, world!");
    assert_eq!(agent["kwargs"]["attempt"], 2, "a JSON value stays JSON");
    let (name, result) = &job.trial_results()[0];
    assert_eq!(reward(result), Some(1.0), "{result}");
    assert_eq!(exception(result), None);
    let stdout = job.trial_file(name, "agent/command/stdout.txt");
    assert_eq!(
        stdout.trim(),
        "model=openai/scripted-model provider=openai name=scripted-model workdir=/app timeout=60 logs=/logs/agent"
    );
    let stderr = job.trial_file(name, "agent/command/stderr.txt");
    assert_eq!(stderr.trim(), "a line for stderr");
    assert_eq!(job.trial_file(name, "agent/command/return-code.txt"), "0\n");
    let command = job.trial_file(name, "agent/command/command.txt");
    assert!(
        command.contains("printf '%s\\n' 'Hello, world!'"),
        "{command}"
    );
    let instruction = job.trial_file(name, "agent/instruction.txt");
    assert!(instruction.contains("/app/hello.txt"), "{instruction}");
    // The trace was collected as it was and converted to ATIF with the same totals.
    assert!(
        job.trial_file(name, "agent/traces/mini.json")
            .contains("mini-swe-agent-1.1")
    );
    let trajectory = job.json(&format!("{name}/agent/trajectory.json"));
    assert!(
        tasks::atif::validate_value(&trajectory).is_empty(),
        "{trajectory}"
    );
    assert_eq!(trajectory["agent"]["name"], "mini-swe-agent");
    assert_eq!(trajectory["final_metrics"]["total_prompt_tokens"], 200);
    assert_eq!(trajectory["final_metrics"]["total_completion_tokens"], 42);
    assert_eq!(trajectory["final_metrics"]["total_cached_tokens"], 40);
    assert_eq!(result["agent_result"]["n_input_tokens"], 200);
    assert_eq!(result["agent_result"]["n_output_tokens"], 42);
    assert_eq!(result["agent_result"]["n_cache_tokens"], 40);
    assert!(containers_with_label(&format!("runner.job={}", job.job_id())).is_empty());
}

#[test]
fn the_agent_deadline_kills_the_command_and_keeps_what_it_printed() {
    let dir = tempfile::tempdir().unwrap();
    // The trace never appears (the command is killed first); the timeout is what is recorded.
    let config = write_agent_config(
        dir.path(),
        r#"name = "sleepy-agent"
version = "0.1"
[run]
command = """
echo "started"
sleep 300
echo "survived the deadline" > /app/survived.txt
"""
[traces]
files = ["/tmp/sleepy/trajectory.json"]
[trajectory]
format = "atif"
file = "trajectory.json"
"#,
    );
    let jobs = dir.path().join("jobs");
    let started = Instant::now();
    // 60 s × 0.05 = a 3 s agent deadline.
    let (code, _) = run(
        &jobs,
        "tasks/examples/hello-file",
        &config,
        &["--agent-timeout-multiplier", "0.05"],
    );
    let elapsed = started.elapsed();
    assert_eq!(code, 0, "an agent timeout is a scored result");
    assert!(
        elapsed < Duration::from_secs(120),
        "the command was not killed at its deadline ({elapsed:?})"
    );
    let job = Job::single_in(&jobs);
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result).as_deref(), Some("AgentTimeoutError"));
    assert_eq!(reward(result), Some(0.0), "verification still ran");
    let execution = &result["agent_execution"];
    let secs = chrono::DateTime::parse_from_rfc3339(execution["finished_at"].as_str().unwrap())
        .unwrap()
        - chrono::DateTime::parse_from_rfc3339(execution["started_at"].as_str().unwrap()).unwrap();
    assert!(
        secs.num_seconds() < 30,
        "the agent phase took {secs}: the kill came late"
    );
    job.assert_trial_files(
        name,
        &[
            ("agent/command/stdout.txt", "started\n"),
            ("agent/command/return-code.txt", "timeout\n"),
        ],
    );
    assert!(!job.dir.join(name).join("agent/trajectory.json").exists());
}

#[test]
fn config_and_flag_mistakes_are_refused_naming_the_field_or_flag() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_agent_config(
        dir.path(),
        "name = \"x\"\n[run]\ncommand = \"run {kwargs.limit} {model}\"\n",
    );
    let jobs = dir.path().join("jobs");
    let with_flags = |flags: &[&str]| run(&jobs, "tasks/examples/hello-file", &config, flags);
    let (code, stderr) = with_flags(&["-m", "a/b"]);
    assert_eq!(code, 2, "bad input");
    assert!(
        stderr.contains("`run.command`") && stderr.contains("--ak limit=VALUE"),
        "{stderr}"
    );
    let (code, stderr) = with_flags(&["--ak", "limit=1"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("-m/--model"), "{stderr}");
    let (code, stderr) = with_flags(&["--ak", "no-dash=1"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--ak/--agent-kwarg \"no-dash\""),
        "{stderr}"
    );
    let typo = write_agent_config(
        dir.path(),
        "name = \"x\"\n[run]\ncommand = \"run {instructions}\"\n",
    );
    let (code, stderr) = run(&jobs, "tasks/examples/hello-file", &typo, &[]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("`run.command`") && stderr.contains("{instructions}"),
        "{stderr}"
    );
    assert!(!jobs.exists(), "no job dir for refused flags");
}

/// What each scripted model turn reports.
const TURN: Usage = Usage {
    input: 120,
    cached: 20,
    cache_write: 0,
    output: 30,
};
const MODEL: &str = "openai/gpt-scripted";

/// `runner run` of the shipped agent config `adapter/agents/<agent>/agent.toml` on hello-file
/// through the bridge to a scripted upstream answering from `script`; returns the upstream, the
/// job (which must have exited 0) and the temp dir holding it.
fn run_shipped(agent: &str, script: Script) -> (ScriptedUpstream, Job, tempfile::TempDir) {
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, script);
    let dir = tempfile::tempdir().unwrap();
    let llm = dir.path().join("llm.toml");
    std::fs::write(
        &llm,
        format!(
            "[[providers]]\nname = \"openai\"\napi = \"openai\"\nbase_url = \"{}\"\nkey_env = \"OPENAI_API_KEY\"\n",
            upstream.openai_base_url()
        ),
    )
    .unwrap();
    let jobs = dir.path().join("jobs");
    ensure_base_image();
    let config = workspace_root().join(format!("adapter/agents/{agent}/agent.toml"));
    let llm_arg = llm.display().to_string();
    let output = run_hello_file(&jobs, &config)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .args(["-m", MODEL, "--llm-config", &llm_arg])
        // The install (600-700 MB from the index) may be slow on a busy machine.
        .args(["--agent-setup-timeout-multiplier", "3"])
        // Importing litellm alone can take tens of seconds on a loaded machine.
        .args(["--agent-timeout-multiplier", "3"])
        .timeout(Duration::from_secs(1500))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let job = Job::single_in(&jobs);
    (upstream, job, dir)
}

#[test]
fn mini_swe_agent_from_the_package_index_solves_an_example_with_tool_calls_through_the_bridge() {
    // mini's default config (`mini`, litellm with its `bash` tool): every scripted answer is a
    // tool call, the last one its submit command.
    let (fragment, commands) = solutions()
        .into_iter()
        .find(|(fragment, _)| *fragment == "/app/hello.txt")
        .unwrap();
    let script = Script::new().when(fragment, Dialect::MiniToolCalls.replies(&commands, TURN));
    let (upstream, job, _dir) = run_shipped("mini-swe-agent", script);
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{result}");
    assert_eq!(reward(result), Some(1.0), "{result}");
    assert_eq!(result["agent_info"]["version"], "2.4.6");
    // The trajectory mini-swe-agent wrote, converted to ATIF, counts exactly the script's usage.
    let trajectory = job.json(&format!("{name}/agent/trajectory.json"));
    assert!(
        tasks::atif::validate_value(&trajectory).is_empty(),
        "{trajectory}"
    );
    let metrics = &trajectory["final_metrics"];
    assert_eq!(metrics["total_prompt_tokens"], 2 * TURN.input, "{metrics}");
    assert_eq!(
        metrics["total_completion_tokens"],
        2 * TURN.output,
        "{metrics}"
    );
    assert_eq!(metrics["total_cached_tokens"], 2 * TURN.cached, "{metrics}");
    // … and so does the bridge's metering, which the trial's agent_result holds.
    assert_eq!(result["agent_result"]["n_input_tokens"], 2 * TURN.input);
    assert_eq!(result["agent_result"]["n_output_tokens"], 2 * TURN.output);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 2, "two model calls");
    assert!(seen.iter().all(|s| s.body["model"] == "gpt-scripted"));
    // mini offered its bash tool, and answered the first call with the tool's result.
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "bash");
    let answered = seen[1].body["messages"].as_array().unwrap();
    assert!(answered.iter().any(|m| m["role"] == "tool"), "{answered:?}");
    // The ATIF steps hold the tool calls.
    let steps = trajectory["steps"].as_array().unwrap();
    let calls: Vec<&Value> = steps
        .iter()
        .filter_map(|s| s["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 2, "{trajectory}");
    // The upstream key went nowhere near the job dir.
    let leaked = std::process::Command::new("grep")
        .args(["-rlF", OPENAI_KEY])
        .arg(&job.dir)
        .output()
        .unwrap();
    assert!(
        leaked.stdout.is_empty(),
        "the key is in {}",
        String::from_utf8_lossy(&leaked.stdout)
    );
}

#[test]
fn aider_from_the_package_index_solves_an_example_through_the_bridge() {
    // aider's `whole` edit format: the file's path, then its whole content in a fence.
    let script = Script::new().when(
        "/app/hello.txt",
        vec![Reply::with_usage(
            "hello.txt\n```\nHello, world!\n```\n",
            TURN,
        )],
    );
    let (upstream, job, _dir) = run_shipped("aider", script);
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{result}");
    assert_eq!(reward(result), Some(1.0), "{result}");
    assert_eq!(result["agent_info"]["version"], "0.86.2");
    // aider keeps no trajectory; the bridge's metering is the trial's token count.
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "one message, one model call");
    assert_eq!(seen[0].body["model"], "gpt-scripted");
    let agent = &result["agent_result"];
    assert_eq!(agent["n_input_tokens"], TURN.input, "{agent}");
    assert_eq!(agent["n_output_tokens"], TURN.output, "{agent}");
    assert!(
        job.trial_file(name, "agent/traces/chat-history.md")
            .contains("Hello, world!")
    );
}
