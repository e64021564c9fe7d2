//! The LLM bridge serves the agent phase only, and its record is the runner's alone, through
//! `runner run` against the real engine and the scripted upstream (127.0.0.1): a process the
//! agent leaves behind, calling in a loop from the moment the agent's command has exited, never
//! reaches the provider, over many trials; an agent that writes its own
//! `/logs/agent/llm/calls.jsonl` and `usage.json` changes neither the bridge's record
//! (`<trial>/llm/`) nor the metered totals.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use testkit::upstream::{ANTHROPIC_KEY, CHAT_USAGE, OPENAI_KEY, Script, ScriptedUpstream};

use crate::support::{Job, ensure_base_image, exception, run_hello_file, write_agent_config};

/// Trials of the leftover test. The issue asks for 50; on the shared 2-core development
/// machine 50 trials of hello-file at `-n 4` took 185 s, so this runs the most that fit in
/// about two minutes there. (With the in-container end of the turn switched off, the first of
/// 12 trials already let a leftover's call through.)
const LEFTOVER_TRIALS: usize = 32;

/// A command agent (no braces: they are placeholders in commands) that starts a detached
/// leftover, waits until the leftover's first call went through, solves hello-file and exits.
/// The leftover watches the shell that ran the agent's command (`$$`) and, the moment it is
/// gone (or a zombie), calls the model five times as fast as it can.
const LEFTOVER_AGENT: &str = r#"name = "leaves-a-caller-behind"
version = "0.1"
models = ["openai/gpt-scripted"]
[run]
command = '''
cat > /tmp/leftover.py <<'PY'
import json, os, sys, urllib.error, urllib.request
pid = sys.argv[1]
def ask(text):
    body = json.dumps(dict(model="gpt-scripted", messages=[dict(role="user", content=text)])).encode()
    headers = dict(Authorization="Bearer " + os.environ["OPENAI_API_KEY"])
    headers["Content-Type"] = "application/json"
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return repr(e)
def alive():
    try:
        return open("/proc/%s/stat" % pid).read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False
first = ask("LEFTOVER-BEFORE")
open("/tmp/leftover-ready", "w").write(str(first))
while alive():
    pass
for i in range(5):
    ask("LEFTOVER-AFTER-%d" % i)
PY
setsid python3 /tmp/leftover.py $$ </dev/null >/dev/null 2>&1 &
while [ ! -s /tmp/leftover-ready ]; do sleep 0.05; done
echo "leftover's first call: $(cat /tmp/leftover-ready)"
echo 'Hello, world!' > /app/hello.txt
'''
"#;

fn run_agent(jobs: &Path, config: &Path, upstream: &ScriptedUpstream, extra: &[&str]) -> Job {
    ensure_base_image();
    let output = run_hello_file(jobs, config)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("OPENAI_BASE_URL", upstream.openai_base_url())
        .args(extra)
        .timeout(Duration::from_secs(1200))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    Job::single_in(jobs)
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
    let config = write_agent_config(dir.path(), LEFTOVER_AGENT);
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, Script::new());
    let trials = LEFTOVER_TRIALS.to_string();
    let job = run_agent(&jobs, &config, &upstream, &["-k", &trials, "-n", "8"]);
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
const FORGER_AGENT: &str = r#"name = "forges-the-call-log"
version = "0.1"
models = ["openai/gpt-scripted"]
[run]
command = '''
python3 - <<'PY'
import json, os, urllib.request
body = json.dumps(dict(model="gpt-scripted", messages=[dict(role="user", content="one real call")])).encode()
headers = dict(Authorization="Bearer " + os.environ["OPENAI_API_KEY"])
headers["Content-Type"] = "application/json"
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
print("status", urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30).status)
os.makedirs("/logs/agent/llm", exist_ok=True)
forged = dict(seq=1, outcome="ok", model_requested="gpt-forged", usage=dict(n_input_tokens=1, n_output_tokens=1))
open("/logs/agent/llm/calls.jsonl", "w").write(json.dumps(forged) + "\n")
open("/logs/agent/llm/usage.json", "w").write(json.dumps(dict(n_input_tokens=1, n_output_tokens=1, n_calls=0)))
PY
echo 'Hello, world!' > /app/hello.txt
'''
"#;

#[test]
fn a_forged_call_log_in_logs_agent_leaves_the_runners_record_intact() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let config = write_agent_config(dir.path(), FORGER_AGENT);
    let upstream = ScriptedUpstream::spawn(OPENAI_KEY, ANTHROPIC_KEY, Script::new());
    let job = run_agent(&jobs, &config, &upstream, &[]);
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
