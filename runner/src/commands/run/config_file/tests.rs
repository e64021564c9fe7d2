//! Unit tests of reading job config files.
use super::*;

fn settings(ext: &str, text: &str) -> Result<FileSettings, String> {
    settings_of(&parse_text(Some(ext), text)?)
}

#[test]
fn the_three_formats_read_the_same_settings() {
    let toml = r#"
        n_attempts = 3
        n_concurrent_trials = 2
        timeout_multiplier = 1.5
        [[agents]]
        name = "oracle"
        [[datasets]]
        path = "tasks/examples"
        task_names = ["hello-*"]
        n_tasks = 1
        [retry]
        max_retries = 2
        exclude_exceptions = ["AgentTimeoutError"]
    "#;
    let yaml = "n_attempts: 3\nn_concurrent_trials: 2\ntimeout_multiplier: 1.5\nagents:\n  - name: oracle\ndatasets:\n  - {path: tasks/examples, task_names: [hello-*], n_tasks: 1}\nretry:\n  max_retries: 2\n  exclude_exceptions: [AgentTimeoutError]\n";
    let json = r#"{"n_attempts": 3, "n_concurrent_trials": 2, "timeout_multiplier": 1.5,
        "agents": [{"name": "oracle", "model_name": null}],
        "datasets": [{"path": "tasks/examples", "task_names": ["hello-*"], "n_tasks": 1}],
        "retry": {"max_retries": 2, "exclude_exceptions": ["AgentTimeoutError"]}}"#;
    let expected = FileSettings {
        k: Some(3),
        n_concurrent: Some(2),
        multipliers: BTreeMap::from([("timeout_multiplier", 1.5)]),
        agent: Some("oracle".into()),
        path: Some("tasks/examples".into()),
        include: Some(vec!["hello-*".into()]),
        n_tasks: Some(1),
        max_retries: Some(2),
        retry_exclude: Some(vec!["AgentTimeoutError".into()]),
        ..FileSettings::default()
    };
    assert_eq!(settings("toml", toml), Ok(expected.clone()));
    assert_eq!(settings("yaml", yaml), Ok(expected.clone()));
    assert_eq!(settings("json", json), Ok(expected));
}

#[test]
fn a_runner_job_config_reads_back() {
    let config = tasks::records::JobConfig {
        job_name: "j".into(),
        jobs_dir: "jobs".into(),
        n_attempts: 2,
        multipliers: tasks::Multipliers::default(),
        debug: false,
        n_concurrent_trials: 4,
        quiet: false,
        retry: engine::job::RetryPolicy::new(1, &[], None)
            .unwrap()
            .record(),
        environment: Default::default(),
        verifier: Default::default(),
        metrics: Vec::new(),
        agents: vec![tasks::records::AgentConfig {
            name: Some("nop".into()),
            ..Default::default()
        }],
        datasets: vec![tasks::records::DatasetRef {
            path: Some("/d".into()),
            task_names: Some(vec!["a*".into()]),
            ..Default::default()
        }],
        tasks: Vec::new(),
        artifacts: Vec::new(),
        extra_instruction_paths: Vec::new(),
        plugins: Vec::new(),
        harbor_026: Default::default(),
        allow_container_secrets: false,
        instruction_suffix: None,
        agent_config: Some("/agents/a.toml".into()),
        shard: Some(2),
        n_shards: Some(3),
        task_env_from: vec!["DATASET_VERSION".into()],
        merged_from: Vec::new(),
    };
    let s = settings_of(&serde_json::to_value(&config).unwrap()).unwrap();
    assert_eq!(
        (
            s.job_name.as_deref(),
            s.k,
            s.agent.as_deref(),
            s.max_retries
        ),
        (Some("j"), Some(2), Some("nop"), Some(1))
    );
    assert_eq!(s.task_env_from, Some(vec!["DATASET_VERSION".to_owned()]));
    assert_eq!(s.path, Some(PathBuf::from("/d")));
    assert_eq!(s.include, Some(vec!["a*".to_owned()]));
    assert_eq!(s.multipliers.get("timeout_multiplier"), Some(&1.0));
    assert_eq!(s.force_build, Some(false));
    assert_eq!(s.agent_config, Some(PathBuf::from("/agents/a.toml")));
    // A shard's config runs that shard again.
    assert_eq!(s.shard, Some(engine::job::Shard { index: 2, count: 3 }));
    for (doc, problem) in [
        (r#"{"shard": 2}"#, "give both"),
        (r#"{"shard": 4, "n_shards": 3}"#, "from 1 to N"),
    ] {
        let err = settings_of(&serde_json::from_str(doc).unwrap()).unwrap_err();
        assert!(
            err.starts_with("shard, n_shards: ") && err.contains(problem),
            "{err}"
        );
    }
}

#[test]
fn unknown_and_unsupported_fields_are_named() {
    let cases = [
        (r#"{"n_atempts": 3}"#, "n_atempts: unknown field"),
        (
            r#"{"environment": {"override_cpus": 2}}"#,
            "environment.override_cpus: 2 is not supported",
        ),
        (
            r#"{"environment": {"type": "daytona"}}"#,
            "environment.type: \"daytona\" is not supported",
        ),
        (
            r#"{"datasets": [{"name": "terminal-bench", "path": "d"}]}"#,
            "datasets[0]: gives both path and name",
        ),
        (
            r#"{"datasets": [{"name": "tb", "version": 2.0}]}"#,
            "datasets[0].version: expected a string",
        ),
        (
            r#"{"datasets": [{"path": "d", "colour": 1}]}"#,
            "datasets[0].colour: unknown field",
        ),
        (
            r#"{"agents": [{"name": "a"}, {"name": "b"}]}"#,
            "agents: 2 agents",
        ),
        (
            r#"{"n_attempts": "five"}"#,
            "n_attempts: expected a whole number",
        ),
        (r#"{"retry": {"max_wait_sec": 5}}"#, "retry.max_wait_sec: 5"),
        (r#"{"debug": true}"#, "debug: true is not supported"),
        (
            r#"{"agents": [{"name": "oracle", "model_name": "openai/gpt-5"}]}"#,
            "agents[0].model_name: \"openai/gpt-5\" is not supported",
        ),
        (r#"[1]"#, "the document: expected a table"),
    ];
    for (text, expected) in cases {
        let err = settings("json", text).unwrap_err();
        assert!(err.starts_with(expected), "{text}: {err}");
    }
    assert!(
        parse_text(Some("ini"), "")
            .unwrap_err()
            .contains(".toml, .json, .yaml")
    );
    assert!(
        settings("yaml", "n_attempts: [")
            .unwrap_err()
            .starts_with("not valid YAML")
    );
}

#[test]
fn a_deeply_nested_config_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let deep = 300_000;
    for (name, text, says) in [
        (
            "job.yaml",
            format!("agents:\n{}x\n", "- ".repeat(deep)),
            "nested deeper than 128",
        ),
        (
            "job.json",
            format!("{{\"agents\": {}{}}}", "[".repeat(deep), "]".repeat(deep)),
            "recursion limit exceeded",
        ),
        (
            "job.toml",
            format!("agents = {}{}\n", "[".repeat(deep), "]".repeat(deep)),
            "not valid TOML",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
    }
}

/// What Harbor 0.26 writes (scripts/harbor-026-job-config.py, through its own models) reads
/// with every field it has, the values runner honours taken.
#[test]
fn a_config_written_by_harbor_0_26_reads() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/harbor-0.26/config.json");
    let settings = load(&fixture).unwrap();
    assert_eq!(settings.job_name.as_deref(), Some("harbor-026"));
    assert_eq!(settings.agent.as_deref(), Some("oracle"));
    assert_eq!(settings.path, Some(PathBuf::from("tasks/examples")));
    assert_eq!(settings.include, Some(vec!["hello-file".to_owned()]));
    assert_eq!((settings.k, settings.n_concurrent), (Some(1), Some(2)));
    assert!(
        settings
            .retry_exclude
            .as_ref()
            .is_some_and(|e| e.contains(&"AgentTimeoutError".to_owned()))
    );
}

/// Each Harbor 0.26 field runner cannot honour is refused by name when set.
#[test]
fn harbor_0_26_fields_are_refused_by_name_when_set() {
    for (json, says) in [
        (
            r#"{"schema_version": 2}"#,
            "schema_version: 2 is not supported",
        ),
        (r#"{"install_only": true}"#, "install_only: true"),
        (
            r#"{"skip_credential_checks": true}"#,
            "skip_credential_checks: true",
        ),
        // override_error_policy is read (below); a malformed one is still refused.
        (
            r#"{"override_error_policy": {"AgentTimeoutError": "retry"}}"#,
            "override_error_policy: expected a table of exception type",
        ),
        (r#"{"user_agent": {"name": "sim"}}"#, "user_agent:"),
        (
            r#"{"extra_instructions": ["be brief"]}"#,
            "extra_instructions:",
        ),
        (
            r#"{"source_jobs": [{"action": "regrade", "type": "local"}]}"#,
            "source_jobs:",
        ),
        (
            r#"{"environment": {"stream": true}}"#,
            "environment.stream: true",
        ),
        (
            r#"{"verifier": {"include_logs": ["*.txt"]}}"#,
            "verifier.include_logs:",
        ),
        (
            r#"{"verifier": {"extra_allowed_hosts": ["pypi.org"]}}"#,
            "verifier.extra_allowed_hosts:",
        ),
        (
            r#"{"agents": [{"name": "oracle", "base_url": "http://x"}]}"#,
            "agents[0].base_url:",
        ),
        (
            r#"{"agents": [{"name": "oracle", "n_concurrent": 2}]}"#,
            "agents[0].n_concurrent: 2",
        ),
        (
            r#"{"agents": [{"name": "oracle", "resume_trajectory": true}]}"#,
            "agents[0].resume_trajectory: true",
        ),
        (
            r#"{"datasets": [{"path": "d", "repo": "org/set"}]}"#,
            "datasets[0].repo:",
        ),
    ] {
        let err = settings("json", json).unwrap_err();
        assert!(err.contains(says), "{json}: {err}");
    }
    // Their unused values, as Harbor 0.26 writes them, pass.
    settings(
        "json",
        r#"{"schema_version": 1, "install_only": false, "override_error_policy": {},
            "user_agent": null, "extra_instructions": [], "source_jobs": [],
            "environment": {"stream": false}, "agents": [{"name": "oracle",
            "skip_model_parsing": false, "resume_trajectory": false, "include_logs": []}],
            "merged_from": ["a", "b"]}"#,
    )
    .unwrap();
}

/// Harbor 0.26's `override_error_policy` is read as it is written, every key of an entry
/// optional, and what runner cannot honour is refused naming the entry and the field.
#[test]
fn override_error_policy_is_read_and_checked() {
    let read = settings(
        "json",
        r#"{"override_error_policy": {
            "AgentTimeoutError": {"should_retry": false, "should_grade": false, "has_valid_reward": null},
            "VerifierEnvError": {"should_retry": true},
            "ApiRateLimitError": {"should_retry": false}}}"#,
    )
    .unwrap();
    let overrides = read.override_error_policy.unwrap();
    assert_eq!(
        overrides["AgentTimeoutError"],
        tasks::error_policy::ErrorPolicyOverride {
            should_retry: Some(false),
            should_grade: Some(false),
            has_valid_reward: None,
        }
    );
    assert_eq!(overrides["VerifierEnvError"].should_retry, Some(true));
    assert_eq!(overrides["ApiRateLimitError"].should_retry, Some(false));
    for (json, says) in [
        (
            r#"{"override_error_policy": {"AgentTimeoutError": {"should_regrade": true}}}"#,
            "unknown field `should_regrade`",
        ),
        (
            r#"{"override_error_policy": {"SandboxBuildFailedError": {"should_grade": true}}}"#,
            "override_error_policy.SandboxBuildFailedError.should_grade: true is not supported",
        ),
        (
            r#"{"override_error_policy": {"NoSuchError": {"should_retry": true}}}"#,
            "override_error_policy.NoSuchError: unknown exception type",
        ),
        (
            r#"{"override_error_policy": {"AgentTimeoutError": {"should_retry": true}}}"#,
            "override_error_policy.AgentTimeoutError.should_retry: true is not supported: runner blames",
        ),
        (
            r#"{"override_error_policy": {"CancelledError": {"should_retry": true}}}"#,
            "override_error_policy.CancelledError.should_retry: true is not supported",
        ),
    ] {
        let err = settings("json", json).unwrap_err();
        assert!(err.contains(says), "{json}: {err}");
    }
}

#[test]
fn a_catalogue_agent_takes_its_model_kwargs_and_env_as_harbor_configs_give_them() {
    // The agents block of a Terminal-Bench leaderboard config.
    let yaml = "agents:\n  - name: claude-code\n    model_name: anthropic/claude-sonnet-4-5\n    kwargs:\n      max_turns: 30\n      reasoning_effort: high\n    env:\n      MAX_THINKING_TOKENS: \"4096\"\ndatasets:\n  - path: tasks/examples\n";
    let s = settings("yaml", yaml).unwrap();
    assert_eq!(s.agent.as_deref(), Some("claude-code"));
    assert_eq!(
        s.agent_model.as_deref(),
        Some("anthropic/claude-sonnet-4-5")
    );
    assert_eq!(s.agent_kwargs, ["max_turns=30", "reasoning_effort=high"]);
    assert_eq!(s.agent_env, ["MAX_THINKING_TOKENS=4096"]);
    // A built-in agent still takes none of them.
    let err = settings("yaml", &yaml.replace("claude-code", "oracle")).unwrap_err();
    assert!(err.contains("agents[0].model_name"), "{err}");
}
