use serde_json::json;
use tasks::atif::StepSource;

use super::*;
use crate::command::session_log::golden::{Expected, converted};

/// Claude Code 2.1.337's own session log of `hello-file` (tests/fixtures/agent-logs/README.md).
const LOG: &[u8] = include_bytes!("../../../tests/fixtures/agent-logs/claude-code-2.1.337.jsonl");

/// The golden test's log and who it says it is.
const EXPECTED: Expected<'static> = Expected {
    session_id: "2dbcdb9d-77f2-4265-afbf-92cdac6879ba",
    agent: "claude-code",
    version: "2.1.337",
    model: "claude-sonnet-4-5",
};

#[test]
fn a_real_session_becomes_valid_atif_with_its_tool_call_result_and_usage() {
    let (trajectory, value) = converted(
        convert,
        "claude-code-2.1.337.jsonl",
        "anthropic/claude-sonnet-4-5",
        &EXPECTED,
    );
    let sources: Vec<StepSource> = trajectory.steps.iter().map(|s| s.source).collect();
    assert_eq!(
        sources,
        [StepSource::User, StepSource::Agent, StepSource::Agent],
        "the prompt, then one step per model call (its text and tool_use entries merged)"
    );
    assert_eq!(
        value["steps"][0]["message"],
        "Create /app/hello.txt containing Hello, world!\n"
    );
    let call = &value["steps"][1];
    assert_eq!(call["message"], "I run the commands that solve it.");
    assert_eq!(call["tool_calls"][0]["function_name"], "Bash");
    assert_eq!(
        call["tool_calls"][0]["arguments"]["command"],
        "echo 'Hello, world!' > /app/hello.txt"
    );
    assert_eq!(
        call["observation"]["results"][0],
        json!({"source_call_id": "toolu_scripted1x0", "content": "(Bash completed with no output)"})
    );
    // Anthropic's input_tokens leave out the cache: 16 fresh + 5 read per call.
    assert_eq!(call["metrics"]["prompt_tokens"], 21);
    assert_eq!(call["metrics"]["cached_tokens"], 5);
    assert_eq!(call["metrics"]["completion_tokens"], 7);
    assert_eq!(value["steps"][2]["message"], "Done: the task is solved.");
    let totals = &value["final_metrics"];
    assert_eq!(
        (
            &totals["total_prompt_tokens"],
            &totals["total_completion_tokens"],
            &totals["total_cached_tokens"]
        ),
        (&json!(42), &json!(14), &json!(10)),
        "two model calls, each counted once though the first logged two entries"
    );
    assert_eq!(totals["total_steps"], 3);
    assert!(
        totals["total_cost_usd"].as_f64().unwrap() > 0.0,
        "Claude Code's own estimate"
    );
}

#[test]
fn a_cut_last_line_is_skipped_and_a_cut_middle_line_is_refused() {
    let mut cut = LOG.to_vec();
    cut.extend_from_slice(b"{\"type\":\"assistant\",\"mess");
    assert!(convert(&cut, None).is_ok());
    let text = String::from_utf8_lossy(LOG);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "{not json");
    let err = convert(lines.join("\n").as_bytes(), None).unwrap_err();
    assert!(err.to_string().starts_with("line 4 is not JSON"), "{err}");
}

#[test]
fn a_log_without_a_model_answer_is_refused() {
    let text = String::from_utf8_lossy(LOG);
    let prompt_only: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"type\":\"assistant\""))
        .collect();
    let err = convert(prompt_only.join("\n").as_bytes(), None).unwrap_err();
    assert_eq!(err.to_string(), "the log has no model answer");
}
