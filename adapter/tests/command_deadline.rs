//! `--tell-agent-deadline` through a command-style agent in `testkit`'s fake sandbox: what the
//! agent's command reads, what the trial records, and nothing of it when the option is off.

use std::path::Path;
use std::time::{Duration, Instant};

use adapter::{Agent, AgentRun, CommandAgent, CommandAgentConfig, CommandAgentOptions};
use testkit::{FakeSandbox, TaskFixture};

const INSTRUCTION: &str = "Create /app/hello.txt\n";

/// Runs an agent whose command copies the instruction file it is given to
/// `/logs/agent/seen.md`; returns what it read, `agent/instruction.txt`, and
/// `agent_result.metadata`.
async fn run(
    name: &str,
    tell_deadline: bool,
    timeout: Option<f64>,
) -> (String, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let task = TaskFixture::new("t/deadline")
        .instruction(INSTRUCTION)
        .write(dir.path());
    let text = format!(
        "name = \"{name}\"\nversion = \"1.0\"\n[run]\ncommand = \"cp {{instruction_file}} /logs/agent/seen.md\"\n"
    );
    let config = CommandAgentConfig::parse(Path::new("/cfg/agent.toml"), &text).unwrap();
    let options = CommandAgentOptions {
        tell_deadline,
        ..CommandAgentOptions::default()
    };
    let agent = CommandAgent::new(config, options).unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let sandbox = FakeSandbox::new().with_workdir(workspace.display().to_string());
    let trial_dir = dir.path().join("trial");
    let run = AgentRun {
        task: &task,
        trial_dir: trial_dir.clone(),
        user: None,
        setup_deadline: Instant::now() + Duration::from_secs(60),
        run_deadline: Some(Instant::now() + Duration::from_secs(60)),
        agent_timeout_sec: timeout,
        step: None,
        end_turn: None,
    };
    let report = agent.run(&sandbox, &run, &task.instruction).await.unwrap();
    let seen = std::fs::read_to_string(sandbox.path("/logs/agent/seen.md")).unwrap();
    let recorded = std::fs::read_to_string(trial_dir.join("agent/instruction.txt")).unwrap();
    let metadata = report.context.unwrap().metadata.unwrap();
    (seen, recorded, serde_json::Value::Object(metadata))
}

#[tokio::test]
async fn told_the_agent_reads_its_deadline_after_the_instruction_and_the_trial_records_it() {
    let (seen, recorded, metadata) = run("deadline-told", true, Some(600.0)).await;
    let told = "You have 600 seconds to complete this task.";
    assert!(
        seen.starts_with(&format!("{INSTRUCTION}\n\n{told}")),
        "the deadline follows the instruction after a blank line: {seen:?}"
    );
    assert_eq!(
        recorded, seen,
        "agent/instruction.txt is what the command read"
    );
    assert_eq!(metadata["deadline_told"]["agent_timeout_sec"], 600);
    assert_eq!(
        metadata["deadline_told"]["extra_instruction"].as_str(),
        seen.strip_prefix(&format!("{INSTRUCTION}\n\n"))
    );
}

#[tokio::test]
async fn off_by_default_the_instruction_is_sent_verbatim_and_nothing_is_recorded() {
    let (seen, recorded, metadata) = run("deadline-not-told", false, Some(600.0)).await;
    assert_eq!(seen, INSTRUCTION);
    assert_eq!(recorded, INSTRUCTION);
    assert!(metadata.get("deadline_told").is_none(), "{metadata}");
    assert_eq!(metadata["return_code"], "0");
}
