use serde_json::json;
use tasks::atif::StepSource;

use super::*;
use crate::command::session_log::golden::{Expected, converted};

/// Codex 0.163.0's own rollout of `hello-file` (tests/fixtures/agent-logs/README.md).
const LOG: &[u8] = include_bytes!("../../../tests/fixtures/agent-logs/codex-0.163.0.jsonl");

/// The golden test's log and who it says it is.
const EXPECTED: Expected<'static> = Expected {
    session_id: "01a24e92-cf3c-7372-96d6-4f9876ca547d",
    agent: "codex",
    version: "0.163.0",
    model: "gpt-5",
};

#[test]
fn a_real_rollout_becomes_valid_atif_with_its_tool_call_result_and_usage() {
    let (trajectory, value) = converted(convert, "codex-0.163.0.jsonl", "openai/gpt-5", &EXPECTED);
    let sources: Vec<StepSource> = trajectory.steps.iter().map(|s| s.source).collect();
    let first_user = sources.iter().position(|s| *s == StepSource::User).unwrap();
    assert_eq!(
        value["steps"][first_user]["message"], "Create /app/hello.txt containing Hello, world!",
        "the harness's environment context is a system step; the instruction is the first user step"
    );
    let agent: Vec<&serde_json::Value> = value["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["source"] == "agent")
        .collect();
    assert_eq!(agent.len(), 2, "one step per model call");
    assert_eq!(agent[0]["message"], "I run the commands that solve it.");
    assert_eq!(agent[0]["tool_calls"][0]["function_name"], "exec_command");
    assert_eq!(
        agent[0]["tool_calls"][0]["arguments"],
        json!({"cmd": "echo 'Hello, world!' > /app/hello.txt"})
    );
    let result = &agent[0]["observation"]["results"][0];
    assert_eq!(result["source_call_id"], "call_scripted1x0");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Process exited with code 0"),
        "{result}"
    );
    assert_eq!(
        agent[0]["metrics"],
        json!({"prompt_tokens": 21, "completion_tokens": 7, "cached_tokens": 5})
    );
    assert_eq!(agent[1]["message"], "Done: the task is solved.");
    let totals = &value["final_metrics"];
    assert_eq!(totals["total_prompt_tokens"], 42);
    assert_eq!(totals["total_completion_tokens"], 14);
    assert_eq!(totals["total_cached_tokens"], 10);
}

#[test]
fn older_rollouts_take_each_calls_usage_from_token_count_events() {
    let text = String::from_utf8_lossy(LOG);
    let without_records: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"type\":\"token_usage_record\""))
        .collect();
    let trajectory = convert(without_records.join("\n").as_bytes(), None).unwrap();
    let totals = trajectory.final_metrics.unwrap();
    assert_eq!(
        (totals.total_prompt_tokens, totals.total_completion_tokens),
        (Some(42), Some(14))
    );
}
