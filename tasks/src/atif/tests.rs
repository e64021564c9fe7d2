//! Validator tests: a valid base document, and one broken variant per rule.

use serde_json::{Value, json};

use super::*;

/// The abridged Terminus-2 golden trajectory of the reference (ATIF-v1.6).
fn golden() -> Value {
    json!({
        "schema_version": "ATIF-v1.6", "session_id": "NORMALIZED_SESSION_ID",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-4o", "extra": {"parser": "json"}},
        "steps": [
            {"step_id": 1, "source": "user", "message": "You are an AI assistant tasked with solving command-line tasks ..."},
            {"step_id": 2, "source": "agent", "model_name": "gpt-4o", "timestamp": "2026-06-10T12:00:00Z",
             "message": "Analysis: Terminal is ready.\nPlan: Echo hello world to stdout.",
             "tool_calls": [{"tool_call_id": "call_0_1", "function_name": "bash_command",
                             "arguments": {"keystrokes": "echo 'Hello, world!'\n", "duration": 0.1}}],
             "observation": {"results": [{"source_call_id": "call_0_1", "content": "Hello, world!\n"}]},
             "metrics": {"prompt_tokens": 682, "completion_tokens": 55, "cost_usd": 0.002255}}
        ],
        "final_metrics": {"total_prompt_tokens": 982, "total_completion_tokens": 145, "total_cached_tokens": 0, "total_cost_usd": 0.003905}
    })
}

fn paths(errors: &[AtifError]) -> Vec<&str> {
    errors.iter().map(|e| e.path.as_str()).collect()
}

/// Asserts the document has exactly one error, at `path`, whose message contains `needle`.
fn only_error(doc: &Value, path: &str, needle: &str) {
    let errors = validate_value(doc);
    assert_eq!(paths(&errors), [path], "{errors:#?}");
    assert!(
        errors[0].message.contains(needle),
        "{:?} should mention {needle}",
        errors[0].message
    );
}

/// The golden document declaring `version`.
fn golden_at(version: &str) -> Value {
    let mut doc = golden();
    doc["schema_version"] = json!(version);
    doc
}

/// Asserts that `doc` has one error, at `path` and mentioning `needle`, and none once it
/// declares `version`.
fn refused_until(mut doc: Value, path: &str, needle: &str, version: &str) {
    only_error(&doc, path, needle);
    doc["schema_version"] = json!(version);
    assert_eq!(validate_value(&doc), []);
}

#[test]
fn golden_is_valid() {
    assert_eq!(validate_value(&golden()), []);
}

#[test]
fn every_version_accepts_a_base_document() {
    for minor in 0..=7 {
        let mut doc = golden();
        doc["schema_version"] = json!(format!("ATIF-v1.{minor}"));
        assert_eq!(validate_value(&doc), [], "ATIF-v1.{minor}");
    }
}

#[test]
fn step_ids_must_run_from_one() {
    let mut doc = golden();
    doc["steps"][1]["step_id"] = json!(3);
    only_error(&doc, "$.steps[1].step_id", "must be 2");
    doc["steps"][1]["step_id"] = json!(0);
    only_error(&doc, "$.steps[1].step_id", "≥ 1");
}

#[test]
fn agent_only_fields_are_rejected_on_other_steps() {
    for (key, value) in [
        ("model_name", json!("gpt-4o")),
        ("reasoning_effort", json!("high")),
        ("reasoning_content", json!("thinking")),
        ("tool_calls", json!([])),
        ("metrics", json!({})),
    ] {
        let mut doc = golden();
        doc["steps"][0][key] = value;
        only_error(&doc, &format!("$.steps[0].{key}"), "only agent steps");
    }
}

#[test]
fn observation_call_ids_must_match_a_tool_call_of_the_same_step() {
    let mut doc = golden();
    doc["steps"][1]["observation"]["results"][0]["source_call_id"] = json!("call_9");
    only_error(
        &doc,
        "$.steps[1].observation.results[0].source_call_id",
        "call_0_1",
    );
}

#[test]
fn timestamps_must_parse() {
    let mut doc = golden();
    doc["steps"][1]["timestamp"] = json!("June 10th");
    only_error(&doc, "$.steps[1].timestamp", "ISO-8601");
}

#[test]
fn unknown_fields_are_rejected_with_their_path() {
    let mut doc = golden();
    doc["steps"][1]["tool_calls"][0]["args"] = json!({});
    only_error(&doc, "$.steps[1].tool_calls[0].args", "unknown field");
    let mut doc = golden();
    doc["colour"] = json!("blue");
    only_error(&doc, "$.colour", "unknown field");
}

#[test]
fn fields_of_later_versions_are_unknown_in_earlier_ones() {
    let cases = [
        ("ATIF-v1.0", "", "extra", json!({})),
        (
            "ATIF-v1.2",
            "/steps/1/metrics",
            "completion_token_ids",
            json!([1, 2]),
        ),
        (
            "ATIF-v1.3",
            "/steps/1/metrics",
            "prompt_token_ids",
            json!([1]),
        ),
        ("ATIF-v1.4", "/agent", "tool_definitions", json!([])),
        ("ATIF-v1.4", "/steps/1", "is_copied_context", json!(false)),
        ("ATIF-v1.6", "", "trajectory_id", json!("t")),
        ("ATIF-v1.6", "/steps/1", "llm_call_count", json!(1)),
        ("ATIF-v1.6", "/steps/1/tool_calls/0", "extra", json!({})),
        (
            "ATIF-v1.6",
            "/steps/1/observation/results/0",
            "extra",
            json!({}),
        ),
    ];
    for (version, parent, key, value) in cases {
        let mut doc = golden();
        doc["schema_version"] = json!(version);
        doc["agent"].as_object_mut().unwrap().remove("extra");
        doc.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert(key.to_owned(), value);
        let path = format!("${}.{key}", json_path(parent));
        only_error(&doc, &path, "introduced in");
        // The same document is valid in ATIF-v1.7.
        doc["schema_version"] = json!("ATIF-v1.7");
        assert_eq!(validate_value(&doc), [], "{version} {path}");
    }
}

/// `/steps/1/metrics` → `.steps[1].metrics`.
fn json_path(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|part| {
            if part.parse::<usize>().is_ok() {
                format!("[{part}]")
            } else {
                format!(".{part}")
            }
        })
        .collect()
}

#[test]
fn content_parts_need_v1_6() {
    let mut doc = golden_at("ATIF-v1.5");
    doc["steps"][0]["message"] = json!([{"type": "text", "text": "hi"}]);
    refused_until(doc, "$.steps[0].message", "ATIF-v1.6", "ATIF-v1.6");
}

#[test]
fn content_parts_have_text_iff_text_and_source_iff_image() {
    let mut doc = golden();
    doc["steps"][0]["message"] = json!([{"type": "image", "text": "x", "source": {"media_type": "image/png", "path": "a.png"}}]);
    only_error(&doc, "$.steps[0].message[0].text", "only text parts");
    doc["steps"][0]["message"] =
        json!([{"type": "image", "source": {"media_type": "image/bmp", "path": "a.png"}}]);
    only_error(&doc, "$.steps[0].message[0].source.media_type", "image/png");
}

#[test]
fn required_fields_are_reported() {
    let mut doc = golden();
    doc["steps"][1]["tool_calls"][0]
        .as_object_mut()
        .unwrap()
        .remove("arguments");
    only_error(
        &doc,
        "$.steps[1].tool_calls[0].arguments",
        "missing required field",
    );
    let mut doc = golden();
    doc["steps"][1]["tool_calls"][0]["arguments"] = json!("ls");
    only_error(
        &doc,
        "$.steps[1].tool_calls[0].arguments",
        "must be an object",
    );
    let mut doc = golden();
    doc["agent"].as_object_mut().unwrap().remove("version");
    only_error(&doc, "$.agent.version", "missing required field");
    let mut doc = golden();
    doc["steps"] = json!([]);
    only_error(&doc, "$.steps", "at least one step");
}

#[test]
fn session_id_is_required_up_to_v1_6_only() {
    let mut doc = golden();
    doc.as_object_mut().unwrap().remove("session_id");
    refused_until(doc, "$.session_id", "required up to ATIF-v1.6", "ATIF-v1.7");
}

#[test]
fn observations_on_system_steps_need_v1_2() {
    let mut doc = golden_at("ATIF-v1.1");
    doc["steps"][0]["source"] = json!("system");
    doc["steps"][0]["observation"] = json!({"results": [{"content": "boot"}]});
    refused_until(doc, "$.steps[0].observation", "ATIF-v1.2", "ATIF-v1.2");
}

#[test]
fn llm_call_count_zero_forbids_metrics_and_reasoning() {
    let mut doc = golden_at("ATIF-v1.7");
    doc["steps"][1]["llm_call_count"] = json!(0);
    only_error(&doc, "$.steps[1].metrics", "llm_call_count 0");
    doc["steps"][1]["llm_call_count"] = json!(2);
    assert_eq!(validate_value(&doc), []);
}

#[test]
fn subagent_trajectory_ids_are_unique_and_present() {
    let mut doc = golden_at("ATIF-v1.7");
    let mut sub = golden_at("ATIF-v1.7");
    sub["trajectory_id"] = json!("sub-1");
    doc["subagent_trajectories"] = json!([sub.clone(), sub.clone()]);
    only_error(
        &doc,
        "$.subagent_trajectories[1].trajectory_id",
        "duplicate",
    );
    sub.as_object_mut().unwrap().remove("trajectory_id");
    doc["subagent_trajectories"] = json!([sub]);
    only_error(&doc, "$.subagent_trajectories[0].trajectory_id", "non-null");
}

#[test]
fn nested_errors_inside_subagents_carry_the_full_path() {
    let mut doc = golden_at("ATIF-v1.7");
    let mut sub = golden_at("ATIF-v1.7");
    sub["trajectory_id"] = json!("sub-1");
    sub["steps"][1]["step_id"] = json!(5);
    doc["subagent_trajectories"] = json!([sub]);
    only_error(
        &doc,
        "$.subagent_trajectories[0].steps[1].step_id",
        "must be 2",
    );
}

#[test]
fn unknown_schema_version_is_reported() {
    let doc = golden_at("ATIF-v2.0");
    only_error(&doc, "$.schema_version", "unknown schema version");
}

#[test]
fn all_errors_are_collected() {
    let mut doc = golden();
    doc["steps"][0]["step_id"] = json!(7);
    doc["steps"][1]["timestamp"] = json!("nope");
    doc["steps"][1]["observation"]["results"][0]["source_call_id"] = json!("x");
    assert_eq!(validate_value(&doc).len(), 3);
}

#[test]
fn image_paths_must_exist_next_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = golden();
    doc["steps"][0]["message"] =
        json!([{"type": "image", "source": {"media_type": "image/png", "path": "images/a.png"}}]);
    let file = dir.path().join("trajectory.json");
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let errors = validate_file(&file).unwrap();
    assert_eq!(paths(&errors), ["$.steps[0].message[0].source.path"]);
    std::fs::create_dir(dir.path().join("images")).unwrap();
    std::fs::write(dir.path().join("images/a.png"), b"png").unwrap();
    assert_eq!(validate_file(&file).unwrap(), []);
    // A bare value has no file to be relative to, so images are not checked.
    assert_eq!(validate_value(&doc), []);
}

#[test]
fn invalid_json_is_an_error_at_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trajectory.json");
    std::fs::write(&file, b"{not json").unwrap();
    let errors = validate_file(&file).unwrap();
    assert_eq!(paths(&errors), ["$"]);
    assert!(validate_file(&dir.path().join("missing.json")).is_err());
}

#[test]
fn built_trajectories_validate_and_omit_unset_fields() {
    let mut t = Trajectory::new(
        "s-1",
        Agent {
            name: "oracle".into(),
            version: "1.0".into(),
            ..Agent::default()
        },
    );
    t.steps.push(Step::new(1, StepSource::User, "Do it."));
    let mut step = Step::new(2, StepSource::Agent, "");
    step.tool_calls = Some(vec![ToolCall {
        tool_call_id: "c1".into(),
        function_name: "bash".into(),
        arguments: serde_json::Map::new(),
        extra: None,
    }]);
    step.observation = Some(Observation {
        results: vec![ObservationResult {
            source_call_id: Some("c1".into()),
            content: Some("ok".into()),
            ..Default::default()
        }],
    });
    step.metrics = Some(Metrics {
        prompt_tokens: Some(10),
        ..Default::default()
    });
    t.steps.push(step);
    assert_eq!(t.validate(), []);
    let value = t.to_value();
    assert!(value["steps"][0].get("observation").is_none());
    assert!(value.get("trajectory_id").is_none());
    let back: Trajectory = serde_json::from_value(value).unwrap();
    assert_eq!(back, t);
}
