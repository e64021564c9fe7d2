//! The LLM bridge serves the agent phase only, and its record is the runner's alone, through
//! `runner run` against the real engine and the scripted upstream (127.0.0.1): a process the
//! agent leaves behind, calling in a loop from the moment the agent's command has exited, never
//! reaches the provider, over many trials; an agent that writes its own
//! `/logs/agent/llm/calls.jsonl` and `usage.json` changes neither the bridge's record
//! (`<trial>/llm/`) nor the metered totals.

use serde_json::Value;
use testkit::upstream::{ANTHROPIC_KEY, CHAT_USAGE, OPENAI_KEY, Script, ScriptedUpstream};

use crate::support::{
    Job, PY_ASK, chat_agent, command_agent, exception, run_hello_file_on, write_agent_config,
};

/// Trials of the leftover test. The issue asks for 50; on the shared 2-core development
/// machine 50 trials of hello-file at `-n 4` took 185 s, so this runs the most that fit in
/// about two minutes there. (With the in-container end of the turn switched off, the first of
/// 12 trials already let a leftover's call through.)
const LEFTOVER_TRIALS: usize = 32;

/// A command agent that starts a detached leftover, waits until the leftover's first call
/// went through, solves hello-file and exits. The leftover watches the shell that ran the
/// agent's command (`$$`) and, the moment it is gone (or a zombie), calls the model five times
/// as fast as it can.
fn leftover_agent() -> String {
    let command = format!(
        r#"cat > /tmp/leftover.py <<'PY'
{PY_ASK}import sys
pid = sys.argv[1]
def alive():
    try:
        return open("/proc/%s/stat" % pid).read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False
first = ask("gpt-scripted", "LEFTOVER-BEFORE")
open("/tmp/leftover-ready", "w").write(str(first))
while alive():
    pass
for i in range(5):
    ask("gpt-scripted", "LEFTOVER-AFTER-%d" % i)
PY
setsid python3 /tmp/leftover.py $$ </dev/null >/dev/null 2>&1 &
while [ ! -s /tmp/leftover-ready ]; do sleep 0.05; done
echo "leftover's first call: $(cat /tmp/leftover-ready)"
echo 'Hello, world!' > /app/hello.txt
"#
    );
    command_agent("leaves-a-caller-behind", &["openai/gpt-scripted"], &command)
}

fn records(job: &Job, trial: &str) -> Vec<Value> {
    job.trial_file(trial, "llm/calls.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn asked(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn calls_from_processes_left_behind_never_reach_the_provider_after_the_agent_exits() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let config = write_agent_config(dir.path(), &leftover_agent());
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, Script::new());
    let trials = LEFTOVER_TRIALS.to_string();
    let job = run_hello_file_on(&jobs, &config, &upstream, &["-k", &trials, "-n", "8"]);
    let results = job.trial_results();
    assert_eq!(results.len(), LEFTOVER_TRIALS);
    let mut refused_after = 0;
    for (name, result) in &results {
        assert_eq!(exception(result), None, "{name}: {result}");
        // The leftover's call during the agent phase went through: the path works.
        let stdout = job.trial_file(name, "agent/command/stdout.txt");
        assert!(stdout.contains("first call: 200"), "{name}: {stdout}");
        let records = records(&job, name);
        assert_eq!(records[0]["outcome"], "ok", "{name}");
        // Its calls after the agent's exit were refused by the bridge (those that came
        // before the trial's bridge closed; later ones found no socket at all).
        for record in &records[1..] {
            assert_eq!(record["outcome"], "refused", "{name}: {record}");
            assert_eq!(record["status"], 401, "{name}: {record}");
            refused_after += 1;
        }
        assert_eq!(
            result["agent_result"]["metadata"]["llm_bridge"]["n_calls"], 1,
            "{name}"
        );
    }
    // The window was exercised: leftovers did call after their agent's exit.
    assert!(
        refused_after > 0,
        "no leftover called after its agent exited"
    );
    let seen: Vec<String> = upstream.seen().iter().map(|s| asked(&s.body)).collect();
    let after: Vec<&String> = seen
        .iter()
        .filter(|s| s.starts_with("LEFTOVER-AFTER"))
        .collect();
    assert!(
        after.is_empty(),
        "{} call(s) from leftovers reached the provider after the agent phase",
        after.len()
    );
    assert_eq!(
        seen.iter().filter(|s| *s == "LEFTOVER-BEFORE").count(),
        LEFTOVER_TRIALS
    );
}

/// A command agent that makes one call, then forges the bridge's record where its own
/// `/logs/agent` download lands.
fn forger_agent() -> String {
    chat_agent(
        "forges-the-call-log",
        &["openai/gpt-scripted"],
        r#"print("status", ask("gpt-scripted", "one real call"))
os.makedirs("/logs/agent/llm", exist_ok=True)
forged = dict(seq=1, outcome="ok", model_requested="gpt-forged", usage=dict(n_input_tokens=1, n_output_tokens=1))
open("/logs/agent/llm/calls.jsonl", "w").write(json.dumps(forged) + "\n")
open("/logs/agent/llm/usage.json", "w").write(json.dumps(dict(n_input_tokens=1, n_output_tokens=1, n_calls=0)))
"#,
    )
}

#[test]
fn a_forged_call_log_in_logs_agent_leaves_the_runners_record_intact() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let config = write_agent_config(dir.path(), &forger_agent());
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, Script::new());
    let job = run_hello_file_on(&jobs, &config, &upstream, &[]);
    let (name, result) = &job.trial_results()[0];
    assert_eq!(exception(result), None, "{result}");
    // The agent's files arrived where its download goes, as its own files...
    let forged = job.trial_file(name, "agent/llm/calls.jsonl");
    assert!(forged.contains("gpt-forged"), "{forged}");
    // ... and the runner's record, beside agent/, holds the one real call.
    let records = records(&job, name);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["outcome"], "ok");
    assert_eq!(records[0]["model_requested"], "gpt-scripted");
    assert_eq!(
        records[0]["usage"]["n_input_tokens"], CHAT_USAGE.input,
        "{}",
        records[0]
    );
    let usage: Value = serde_json::from_str(&job.trial_file(name, "llm/usage.json")).unwrap();
    assert_eq!(usage["n_calls"], 1, "{usage}");
    let agent = &result["agent_result"];
    assert_eq!(agent["n_input_tokens"], CHAT_USAGE.input, "{agent}");
    assert_eq!(agent["n_output_tokens"], CHAT_USAGE.output, "{agent}");
    assert_eq!(upstream.seen().len(), 1);
}
