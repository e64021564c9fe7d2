//! Every agent config shipped under `adapter/agents/*/agent.toml` (the catalogue's entries):
//! it loads, builds as a command agent with a model, every command renders with the job's and
//! a trial's placeholder values and is valid bash, and no config hands a credential to the
//! container.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use adapter::command::template;
use adapter::{AgentConfigFile, CommandAgent, CommandAgentConfig, CommandAgentOptions};
use serde_json::{Map, Value};

const MODEL: &str = "openai/gpt-4.1-mini";

/// The command-style configs under `adapter/agents/`, by directory name.
fn shipped_configs() -> Vec<(String, CommandAgentConfig)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("agent.toml").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .filter_map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let path = dir.join("agent.toml");
            match AgentConfigFile::load(&path) {
                Ok(AgentConfigFile::Command(config)) => Some((name, config)),
                // The reference agent is an installed agent with a task API: not a command.
                Ok(AgentConfigFile::Installed(_)) => None,
                Err(e) => panic!("{name}: {e}"),
            }
        })
        .collect()
}

/// `config`'s commands filled as a trial would fill them, with `kwargs` over its own.
fn render(config: &CommandAgentConfig, kwargs: &Map<String, Value>) -> Vec<(String, String)> {
    let mut values = BTreeMap::from([
        ("model".to_owned(), MODEL.to_owned()),
        ("model_provider".to_owned(), "openai".to_owned()),
        ("model_name".to_owned(), "gpt-4.1-mini".to_owned()),
        ("logs_dir".to_owned(), "/logs/agent".to_owned()),
        (
            "instruction_file".to_owned(),
            "/tmp/runner-agent-x/instruction.md".to_owned(),
        ),
        ("workdir".to_owned(), "/app".to_owned()),
        ("agent_timeout_sec".to_owned(), "600".to_owned()),
    ]);
    let mut merged = config.kwargs.clone();
    merged.extend(kwargs.clone());
    for (key, value) in &merged {
        values.insert(format!("kwargs.{key}"), template::kwarg_text(value));
    }
    config
        .commands()
        .into_iter()
        .map(|(key, command)| {
            let filled = template::expand(command, |name| values.get(name).cloned())
                .unwrap_or_else(|e| panic!("{}: {key}: {e}", config.name));
            (key, filled)
        })
        .collect()
}

/// Asserts bash parses `script` (`bash -n`: syntax only, nothing runs).
fn assert_bash_syntax(agent: &str, key: &str, script: &str) {
    let out = Command::new("bash")
        .args(["-n", "-c", script])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{agent}: {key} is not valid bash: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_catalogue_configs_are_all_there_and_named_after_their_directories() {
    let configs = shipped_configs();
    let names: Vec<&str> = configs.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "aider",
        "cursor-cli",
        "gemini-cli",
        "goose",
        "kimi-cli",
        "mini-swe-agent",
        "openhands",
        "opencode",
        "qwen-coder",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
    for (dir, config) in &configs {
        assert_eq!(&config.name, dir, "the config's name is Harbor's name");
        assert!(
            root.join(dir).join("README.md").is_file(),
            "{dir}: README.md"
        );
        assert!(config.version_command.is_some(), "{dir}: version_command");
        assert!(!config.traces.files.is_empty(), "{dir}: traces.files");
    }
}

#[test]
fn every_catalogue_config_builds_with_a_model_and_renders_valid_bash() {
    for (name, config) in shipped_configs() {
        CommandAgent::new(
            config.clone(),
            CommandAgentOptions {
                model: Some(MODEL.into()),
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (key, script) in render(&config, &Map::new()) {
            assert!(
                !script.contains("{kwargs."),
                "{name}: {key} left a placeholder"
            );
            assert_bash_syntax(&name, &key, &script);
        }
    }
}

#[test]
fn kwargs_with_quotes_and_dollars_still_render_valid_bash() {
    // Every string kwarg given a value a shell would choke on unquoted: the template's quoting
    // must keep each command one valid script.
    let nasty = Value::String("it's \"x\" $(touch /tmp/pwned) `id` ; & |".into());
    for (name, config) in shipped_configs() {
        let kwargs: Map<String, Value> = config
            .kwargs
            .iter()
            .filter(|(_, v)| v.is_string())
            .map(|(k, _)| (k.clone(), nasty.clone()))
            .collect();
        for (key, script) in render(&config, &kwargs) {
            assert_bash_syntax(&name, &key, &script);
        }
    }
}

#[test]
fn no_catalogue_config_puts_a_credential_in_the_container() {
    for (name, config) in shipped_configs() {
        adapter::secrets::check_container_env(&config.env)
            .unwrap_or_else(|e| panic!("{name}: [env]: {e}"));
        for (key, value) in &config.kwargs {
            let text = template::kwarg_text(value);
            assert!(
                secrets::credential_reason(key, &text).is_none(),
                "{name}: kwargs.{key} looks like a credential"
            );
        }
        // Keys come from the LLM bridge's variables at run time, never from the file.
        for (key, command) in config.commands() {
            for word in command.split(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
                assert!(
                    secrets::credential_reason("VALUE", word).is_none(),
                    "{name}: {key} holds a key-shaped value"
                );
            }
        }
    }
}

#[test]
fn bridge_agents_read_the_bridge_variables() {
    // Each agent that can use the bridge maps its variables in its run command (cursor-cli
    // cannot: it talks only to Cursor's service and says so when CURSOR_API_KEY is missing).
    for (name, config) in shipped_configs() {
        let run = &config.run.command;
        if name == "cursor-cli" {
            assert!(run.contains("CURSOR_API_KEY is not set"), "{name}");
            continue;
        }
        let reads_bridge = ["OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL"]
            .iter()
            .any(|var| run.contains(var));
        // qwen-coder's CLI reads OPENAI_BASE_URL and OPENAI_API_KEY itself, and Claude Code
        // ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (its run command pins every model alias).
        let reads_itself = run.contains("--auth-type openai") || run.contains("ANTHROPIC_MODEL=");
        assert!(
            reads_bridge || reads_itself,
            "{name}: the run command maps none of the bridge's variables"
        );
    }
}
