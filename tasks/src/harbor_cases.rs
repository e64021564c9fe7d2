//! Harbor 0.13.1's own `task.toml` unit-test cases (tests/unit/models/test_task_config_*.py,
//! test_verifier_config_validation.py, test_validation.py, test_task_validate_steps_verifier_os.py,
//! test_task_windows_multistep.py, test_task_short_name.py), ported: each case must load or
//! fail here exactly as in Harbor. A case Harbor accepts either loads or is refused naming the
//! features the runner does not run yet (`Refused`); a case Harbor rejects fails to parse or load.
//! Cases about serialising (`model_dump_toml`) or runtime network plans are reduced to what they
//! say about loading.

use std::path::Path;

use crate::config::{
    McpTransport, MultiStepRewardStrategy, NetworkMode, TaskConfig, TaskOs, parse_task_config,
};
use crate::task::Task;
use crate::test_files::task_dir;
use crate::unsupported;

/// What Harbor does with a case, and what the runner must do.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Harbor accepts; the runner runs it.
    Loads,
    /// Harbor accepts; the runner refuses it naming exactly these features (by key): Windows
    /// containers (`tasks::unsupported`).
    Refused(&'static [&'static str]),
    /// Harbor rejects; the runner's error contains this text (a field or Harbor's words).
    Fails(&'static str),
}

/// Parses a config as `TaskConfig.model_validate_toml` would be called.
fn config(toml: &str) -> Result<TaskConfig, String> {
    parse_task_config(Path::new("task.toml"), toml)
        .map(|p| p.config)
        .map_err(|e| e.to_string())
}

/// Checks one config-level case; `name` is Harbor's test name.
fn config_case(name: &str, toml: &str, expect: Expect) {
    let parsed = config(toml);
    match (expect, parsed) {
        (Expect::Fails(text), Err(err)) => {
            assert!(err.contains(text), "{name}: expected {text:?} in {err:?}")
        }
        (Expect::Fails(_), Ok(_)) => panic!("{name}: Harbor rejects this config; runner loaded it"),
        (_, Err(err)) => panic!("{name}: Harbor accepts this config; runner failed: {err}"),
        (Expect::Loads, Ok(c)) => {
            let found = unsupported::detect(&c, Path::new("/nonexistent"));
            assert!(found.is_empty(), "{name}: refused {found:?}");
        }
        (Expect::Refused(keys), Ok(c)) => {
            let found: Vec<&str> = unsupported::detect(&c, Path::new("/nonexistent"))
                .iter()
                .map(|f| f.key())
                .collect();
            assert_eq!(found, keys, "{name}");
        }
    }
}

/// Checks one `Task(task_dir)` case.
fn task_case(name: &str, files: &[(&str, &str)], expect: Expect) {
    let dir = task_dir(files);
    let read = Task::read(dir.path());
    let loaded = Task::load(dir.path());
    match expect {
        Expect::Fails(text) => {
            let err = read.expect_err(name).to_string();
            assert!(err.contains(text), "{name}: expected {text:?} in {err:?}");
        }
        Expect::Loads => {
            read.unwrap_or_else(|e| panic!("{name}: {e}"));
            loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        Expect::Refused(keys) => {
            let task = read.unwrap_or_else(|e| panic!("{name}: Harbor loads it; runner: {e}"));
            let found: Vec<&str> = task.unsupported.iter().map(|f| f.key()).collect();
            assert_eq!(found, keys, "{name}");
            let err = loaded.expect_err(name).to_string();
            assert!(err.contains("not supported yet"), "{name}: {err}");
        }
    }
}

/// A case with a separate verifier environment (runner runs it in its own container) whose
/// network modes must be read as Harbor reads them.
fn separate_verifier_case(
    name: &str,
    toml: &str,
    environment: NetworkMode,
    verifier_environment: NetworkMode,
) {
    config_case(name, toml, Expect::Loads);
    let c = config(toml).unwrap();
    assert_eq!(c.environment.effective_network(), environment, "{name}");
    assert_eq!(
        c.verifier.environment.unwrap().effective_network(),
        verifier_environment,
        "{name}"
    );
}

/// The environment's cpus, memory_mb, storage_mb and gpus.
fn resource_limits(c: &TaskConfig) -> (Option<f64>, Option<u64>, Option<u64>, Option<u32>) {
    let env = &c.environment;
    (env.cpus, env.memory_mb, env.storage_mb, env.gpus)
}

const DOCKERFILE: (&str, &str) = ("environment/Dockerfile", "FROM ubuntu:22.04\n");
const INSTRUCTION: (&str, &str) = ("instruction.md", "Do it.\n");
const TEST_SH: (&str, &str) = ("tests/test.sh", "#!/bin/bash\nexit 0\n");

#[test]
fn test_task_config_deprecated_fields() {
    use Expect::*;
    config_case(
        "test_supported_resource_fields_do_not_warn",
        "[environment]\ndocker_image = \"alpine\"\nmemory_mb = 512\nstorage_mb = 1024\n",
        Loads,
    );
    let c = config("[environment]\ndocker_image = \"alpine\"").unwrap();
    assert_eq!(
        resource_limits(&c),
        (None, None, None, None),
        "test_default_construction_uses_provider_defaults_without_warning"
    );
    for toml in [
        "[environment]\nmemory = \"1G\"\nstorage = \"512M\"\n",
        "\n                [environment]\n                memory = \"1G\"\n                storage = \"512M\"\n",
        "[environment]\nmemory = \"1G\"\nmemory_mb = 1024\nstorage = \"512M\"\nstorage_mb = 512\n",
    ] {
        let c = config(toml).unwrap();
        assert_eq!(
            (c.environment.memory_mb, c.environment.storage_mb),
            (Some(1024), Some(512)),
            "test_legacy_resource_fields_* / test_matching_legacy_and_modern_resource_fields"
        );
    }
    config_case(
        "test_conflicting_memory_fields_raise",
        "[environment]\nmemory = \"1G\"\nmemory_mb = 2048\n",
        Fails("Conflicting 'memory' and 'memory_mb'"),
    );
    config_case(
        "test_conflicting_storage_fields_raise",
        "[environment]\nstorage = \"512M\"\nstorage_mb = 1024\n",
        Fails("Conflicting 'storage' and 'storage_mb'"),
    );
}

#[test]
fn test_task_config_env() {
    let c = config(
        "\n[environment.env]\nAPI_KEY = \"${OPENAI_API_KEY}\"\nDEBUG = \"true\"\nMODEL = \"${MODEL:-gpt-4}\"\n",
    )
    .unwrap();
    assert_eq!(c.environment.env["API_KEY"], "${OPENAI_API_KEY}");
    assert_eq!(c.environment.env["MODEL"], "${MODEL:-gpt-4}");
    assert!(config("").unwrap().environment.env.is_empty());
    let c = config("\n[environment.env]\nKEY = \"value\"\n").unwrap();
    assert_eq!(c.environment.env["KEY"], "value", "test_roundtrip");
}

/// One `[[environment.mcp_servers]]` entry as TOML.
fn mcp(body: &str) -> String {
    format!("[[environment.mcp_servers]]\n{body}\n")
}

#[test]
fn test_task_config_mcp() {
    use Expect::*;
    let refused = Loads;
    config_case(
        "test_sse_transport_requires_url",
        &mcp("name = \"test\"\ntransport = \"sse\""),
        Fails("'url' is required for transport 'sse'"),
    );
    config_case(
        "test_streamable_http_transport_requires_url",
        &mcp("name = \"test\"\ntransport = \"streamable-http\""),
        Fails("'url' is required for transport 'streamable-http'"),
    );
    config_case(
        "test_stdio_transport_requires_command",
        &mcp("name = \"test\"\ntransport = \"stdio\""),
        Fails("'command' is required for transport 'stdio'"),
    );
    config_case(
        "test_sse_transport_with_url",
        &mcp("name = \"my-server\"\ntransport = \"sse\"\nurl = \"http://localhost:8000/sse\""),
        refused,
    );
    config_case(
        "test_streamable_http_transport_with_url",
        &mcp(
            "name = \"my-server\"\ntransport = \"streamable-http\"\nurl = \"http://localhost:8000/mcp\"",
        ),
        refused,
    );
    let c = config(&mcp(
        "name = \"my-server\"\ntransport = \"http\"\nurl = \"http://localhost:8000/mcp\"",
    ))
    .unwrap();
    assert_eq!(
        c.environment.mcp_servers[0].transport,
        McpTransport::StreamableHttp,
        "test_http_transport_alias"
    );
    config_case(
        "test_invalid_transport_rejected",
        &mcp(
            "name = \"my-server\"\ntransport = \"streamable_http\"\nurl = \"http://localhost:8000/mcp\"",
        ),
        Fails("environment.mcp_servers[0].transport"),
    );
    let c = config(&mcp(
        "name = \"my-server\"\ntransport = \"stdio\"\ncommand = \"npx\"\nargs = [\"-y\", \"my-mcp-server\"]",
    ))
    .unwrap();
    assert_eq!(
        c.environment.mcp_servers[0].args,
        ["-y", "my-mcp-server"],
        "test_stdio_transport_with_command"
    );
    let c = config(&mcp("name = \"test\"\nurl = \"http://localhost:8000/sse\"")).unwrap();
    let server = &c.environment.mcp_servers[0];
    assert_eq!(
        server.transport,
        McpTransport::Sse,
        "test_default_transport_is_sse"
    );
    assert!(server.args.is_empty(), "test_default_args");
    config_case(
        "test_no_mcp_servers_defaults_to_empty_list",
        "\n        version = \"1.0\"\n        ",
        Loads,
    );
    config_case(
        "test_single_mcp_server",
        "version = \"1.0\"\n[[environment.mcp_servers]]\nname = \"mcp-server\"\ntransport = \"sse\"\nurl = \"http://mcp-server:8000/sse\"\n",
        refused,
    );
    let c = config(
        "version = \"1.0\"\n[[environment.mcp_servers]]\nname = \"server-a\"\ntransport = \"sse\"\nurl = \"http://server-a:8000/sse\"\n\
         [[environment.mcp_servers]]\nname = \"server-b\"\ntransport = \"stdio\"\ncommand = \"npx\"\nargs = [\"-y\", \"server-b\"]\n",
    )
    .unwrap();
    assert_eq!(
        c.environment.mcp_servers.len(),
        2,
        "test_multiple_mcp_servers"
    );
    assert_eq!(c.environment.mcp_servers[1].command.as_deref(), Some("npx"));
    let c = config(
        "version = \"1.0\"\n[metadata]\n[verifier]\ntimeout_sec = 300.0\n[agent]\ntimeout_sec = 600.0\n[environment]\ncpus = 2\nmemory_mb = 4096\n",
    )
    .unwrap();
    assert!(
        c.environment.mcp_servers.is_empty(),
        "test_backwards_compatibility"
    );
    assert_eq!(c.verifier.timeout_sec, 300.0);
    assert_eq!(c.environment.cpus, Some(2.0));
}

#[test]
fn test_task_config_network() {
    use Expect::*;
    let c = config("").unwrap();
    assert_eq!(
        c.environment.effective_network(),
        NetworkMode::Public,
        "test_environment_defaults_to_public"
    );
    config_case(
        "test_parse_public",
        "\n[agent]\nnetwork_mode = \"public\"\n",
        Loads,
    );
    config_case(
        "test_parse_allowlist_hosts",
        "\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"PyPI.org\", \"ubuntu.com.\"]\n",
        Loads,
    );
    let c = config(
        "[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"PyPI.org\", \"ubuntu.com.\"]\n",
    )
    .unwrap();
    assert_eq!(
        c.verifier.allowed_hosts.unwrap(),
        ["pypi.org", "ubuntu.com"]
    );
    let c = config("[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"*.IANA.org.\"]\n")
        .unwrap();
    assert_eq!(
        c.verifier.allowed_hosts.unwrap(),
        ["*.iana.org"],
        "test_parse_allowlist_wildcard_hosts"
    );
    config_case(
        "test_allowed_hosts_without_allowlist_is_rejected",
        "\n[agent]\nallowed_hosts = [\"pypi.org\"]\n",
        Fails("only valid"),
    );
    config_case(
        "test_uppercase_mode_is_rejected",
        "\n[agent]\nnetwork_mode = \"PUBLIC\"\n",
        Fails("agent.network_mode"),
    );
    config_case(
        "test_invalid_value",
        "\n[agent]\nnetwork_mode = \"invalid\"\n",
        Fails("agent.network_mode"),
    );
    config_case(
        "test_allowlist_requires_hosts",
        "\n[agent]\nnetwork_mode = \"allowlist\"\n",
        Fails("allowed_hosts must be non-empty"),
    );
    config_case(
        "test_allowed_hosts_rejected_for_public",
        "\n[agent]\nnetwork_mode = \"public\"\nallowed_hosts = [\"pypi.org\"]\n",
        Fails("only valid"),
    );
    config_case(
        "test_allowed_hosts_rejected_for_no_network",
        "\n[agent]\nnetwork_mode = \"no-network\"\nallowed_hosts = [\"pypi.org\"]\n",
        Fails("only valid"),
    );
    config_case(
        "test_allowed_hosts_reject_urls",
        "\n[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"https://pypi.org/simple\"]\n",
        Fails("not URLs"),
    );
    config_case(
        "test_allowed_hosts_reject_ports",
        "\n[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org:443\"]\n",
        Fails("not URLs, ports, or paths"),
    );
    for host in ["*", "pypi.*", "api.*.pypi.org", "*pypi.org"] {
        let toml =
            format!("\n[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"{host}\"]\n");
        let err = config(&toml).unwrap_err();
        assert!(
            err.contains("wildcard") || err.contains("valid hostnames"),
            "test_allowed_hosts_reject_malformed_wildcards[{host}]: {err}"
        );
    }
    config_case(
        "test_environment_internet_is_not_treated_as_network_policy",
        "\n[environment]\ninternet = \"optional\"\n",
        Loads,
    );
    config_case(
        "test_environment_network_mode_is_allowed",
        "\n[environment]\nnetwork_mode = \"no-network\"\n",
        Loads,
    );
    let separate = Loads;
    separate_verifier_case(
        "test_verifier_environment_network_mode_is_allowed",
        "\n[verifier]\nenvironment_mode = \"separate\"\n\n[verifier.environment]\nnetwork_mode = \"no-network\"\n",
        NetworkMode::Public,
        NetworkMode::NoNetwork,
    );
    separate_verifier_case(
        "test_verifier_environment_uses_own_default_not_top_level_environment",
        "\n[environment]\nnetwork_mode = \"no-network\"\n\n[verifier]\nenvironment_mode = \"separate\"\n\n[verifier.environment]\ncpus = 1\n",
        NetworkMode::NoNetwork,
        NetworkMode::Public,
    );
    config_case(
        "test_verifier_environment_defaults_to_public",
        "\n[verifier]\nenvironment_mode = \"separate\"\n\n[verifier.environment]\ncpus = 1\n",
        separate,
    );
    for (toml, network, name) in [
        (
            "\n[environment]\nallow_internet = false\n",
            NetworkMode::NoNetwork,
            "test_environment_allow_internet_false_maps_environment_and_inherited_roles",
        ),
        (
            "\n[environment]\nallow_internet = true\n",
            NetworkMode::Public,
            "test_environment_allow_internet_true_maps_environment_and_inherited_roles",
        ),
    ] {
        let c = config(toml).unwrap();
        assert_eq!(c.environment.effective_network(), network, "{name}");
    }
    config_case(
        "allow_internet = false",
        "[environment]\nallow_internet = false\n",
        Loads,
    );
    // The agent's public differs from the environment's no-network baseline (runner switches
    // networks between phases), and the verifier's allowlist goes through the egress proxy.
    config_case(
        "test_environment_allow_internet_does_not_override_explicit_policy",
        "\n[agent]\nnetwork_mode = \"public\"\n\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n\n[environment]\nallow_internet = false\n",
        Loads,
    );
    separate_verifier_case(
        "test_verifier_environment_allow_internet_sets_separate_env_baseline_only",
        "\n[verifier]\nenvironment_mode = \"separate\"\n\n[verifier.environment]\nallow_internet = false\n",
        NetworkMode::Public,
        NetworkMode::NoNetwork,
    );
    separate_verifier_case(
        "test_verifier_environment_allow_internet_overrides_task_environment_legacy_policy",
        "\n[environment]\nallow_internet = false\n\n[verifier]\nenvironment_mode = \"separate\"\n\n[verifier.environment]\nallow_internet = true\n",
        NetworkMode::NoNetwork,
        NetworkMode::Public,
    );
    config_case(
        "test_environment_allow_internet_is_not_serialized",
        "\n[environment]\nallow_internet = false\n",
        Loads,
    );
    // A phase policy equal to the environment's changes nothing, so it runs.
    config_case(
        "test_explicit_matching_phase_policy_is_not_applied",
        "\n[environment]\nnetwork_mode = \"no-network\"\n\n[agent]\nnetwork_mode = \"no-network\"\n\n[verifier]\nnetwork_mode = \"no-network\"\n",
        Loads,
    );
    config_case(
        "test_roundtrip_preserves_network_policy",
        "\n[agent]\nnetwork_mode = \"public\"\n\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
        Loads,
    );
}

#[test]
fn test_task_config_network_step_inheritance() {
    use Expect::*;
    config_case(
        "test_step_agent_can_override_task_policy",
        "\n[agent]\nnetwork_mode = \"public\"\n\n[[steps]]\nname = \"one\"\n\n[steps.agent]\nnetwork_mode = \"no-network\"\n",
        Loads,
    );
    config_case(
        "test_step_verifier_inherits_task_policy",
        "\n[verifier]\nnetwork_mode = \"public\"\n\n[[steps]]\nname = \"one\"\n",
        Loads,
    );
    config_case(
        "test_step_verifier_can_override_task_policy",
        "\n[verifier]\nnetwork_mode = \"public\"\n\n[[steps]]\nname = \"one\"\n\n[steps.verifier]\nnetwork_mode = \"no-network\"\n",
        Loads,
    );
    config_case(
        "test_step_verifier_environment_allow_internet_sets_separate_env_baseline",
        "\n[verifier]\nnetwork_mode = \"no-network\"\n\n[[steps]]\nname = \"one\"\n\n[steps.verifier]\nenvironment_mode = \"separate\"\n\n[steps.verifier.environment]\nallow_internet = true\n",
        Loads,
    );
    config_case(
        "test_environment_allow_internet_does_not_create_step_agent_override",
        "\n[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n\n[environment]\nallow_internet = false\n\n[[steps]]\nname = \"one\"\n",
        Loads,
    );
}

#[test]
fn test_task_config_os() {
    use Expect::*;
    assert_eq!(
        config("").unwrap().environment.target_os(),
        TaskOs::Linux,
        "test_default_is_linux"
    );
    for value in ["linux", "LINUX", "Linux", "LiNuX"] {
        let toml = format!("[environment]\nos = \"{value}\"\n");
        config_case("test_case_insensitive_linux", &toml, Loads);
        assert_eq!(
            config(&toml).unwrap().environment.target_os(),
            TaskOs::Linux
        );
    }
    for value in ["windows", "WINDOWS", "Windows", "wInDoWs"] {
        let toml = format!("[environment]\nos = \"{value}\"\n");
        config_case(
            "test_case_insensitive_windows",
            &toml,
            Refused(&["windows"]),
        );
        assert_eq!(
            config(&toml).unwrap().environment.target_os(),
            TaskOs::Windows
        );
    }
    for value in ["macos", "darwin", "freebsd", ""] {
        config_case(
            "test_invalid_os_rejected",
            &format!("[environment]\nos = \"{value}\"\n"),
            Fails("environment.os"),
        );
    }
    let c = config("\nversion = \"1.0\"\n\n[environment]\ncpus = 1\nmemory_mb = 1024\n").unwrap();
    assert_eq!(
        c.environment.target_os(),
        TaskOs::Linux,
        "test_legacy_schema_version_still_accepted"
    );
    assert_eq!(c.schema_version.as_deref(), Some("1.0"));
    config_case(
        "test_windows_task_loads",
        "\nschema_version = \"1.3\"\n\n[environment]\nos = \"windows\"\ncpus = 1\n",
        Refused(&["windows"]),
    );
}

#[test]
fn test_task_config_skills_timeout_workdir() {
    use Expect::*;
    assert!(
        config("version = \"1.0\"")
            .unwrap()
            .environment
            .skills_dir
            .is_none()
    );
    let toml = "version = \"1.0\"\n[environment]\nskills_dir = \"/workspace/skills\"\n";
    config_case("test_skills_dir_parses", toml, Loads);
    assert_eq!(
        config(toml).unwrap().environment.skills_dir.as_deref(),
        Some("/workspace/skills")
    );
    config_case(
        "test_skills_dir_alongside_mcp_servers",
        "version = \"1.0\"\n[environment]\nskills_dir = \"/workspace/skills\"\n[[environment.mcp_servers]]\nname = \"mcp-server\"\ntransport = \"sse\"\nurl = \"http://mcp-server:8000/sse\"\n",
        Loads,
    );
    assert_eq!(
        config("").unwrap().agent.timeout_sec,
        None,
        "test_task_config_no_agent_section"
    );
    assert_eq!(
        config("\n[metadata]\nauthor_name = \"test\"\n")
            .unwrap()
            .agent
            .timeout_sec,
        None,
        "test_task_config_omit_timeout"
    );
    assert_eq!(
        config("\n[agent]\ntimeout_sec = 300.0\n")
            .unwrap()
            .agent
            .timeout_sec,
        Some(300.0),
        "test_task_config_with_timeout"
    );
    assert_eq!(
        config("\n[environment]\nworkdir = \"/workspace/project\"\n")
            .unwrap()
            .environment
            .workdir
            .as_deref(),
        Some("/workspace/project"),
        "test_parse_from_toml"
    );
    assert!(
        config("").unwrap().environment.workdir.is_none(),
        "test_omitted_in_toml_is_none"
    );
}

#[test]
fn test_task_config_toml_dict_cases() {
    use Expect::*;
    // The dicts of test_task_config_toml.py given to model_validate, written as TOML.
    config_case(
        "test_model_dump_toml_orders_task_before_steps_and_sections",
        "[task]\nname = \"org/example\"\ndescription = \"Example task\"\n[metadata]\ndifficulty = \"easy\"\n\
         [agent]\ntimeout_sec = 600.0\n[environment]\ncpus = 2\n[[steps]]\nname = \"step-1\"\n[[steps]]\nname = \"step-2\"\n",
        Loads,
    );
    let toml = "source = \"registry\"\nmulti_step_reward_strategy = \"final\"\nartifacts = [\"logs/out.txt\"]\n[task]\nname = \"org/example\"\n";
    config_case(
        "test_model_dump_toml_keeps_root_fields_before_tables",
        toml,
        Loads,
    );
    let c = config(toml).unwrap();
    assert_eq!(c.source.as_deref(), Some("registry"));
    assert_eq!(
        c.multi_step_reward_strategy,
        Some(MultiStepRewardStrategy::Final)
    );
    assert_eq!(c.artifacts.len(), 1);
    let toml = "[task]\nname = \"org/example\"\n[verifier]\nenvironment_mode = \"separate\"\n[verifier.environment]\ncpus = 4\nos = \"windows\"\n";
    config_case(
        "test_verifier_environment_round_trips_as_nested_section",
        toml,
        Refused(&["windows"]),
    );
    let env = config(toml).unwrap().verifier.environment.unwrap();
    assert_eq!((env.cpus, env.target_os()), (Some(4.0), TaskOs::Windows));
    config_case(
        "test_step_verifier_environment_round_trips",
        "[task]\nname = \"org/example\"\n[[steps]]\nname = \"grade\"\n[steps.verifier]\nenvironment_mode = \"separate\"\n[steps.verifier.environment]\ncpus = 2\n",
        Loads,
    );
    let c = config("[task]\nname = \"org/example\"\n").unwrap();
    assert!(
        c.verifier.environment.is_none(),
        "test_default_verifier_does_not_emit_empty_environment_subtable"
    );
    assert_eq!(
        resource_limits(&c),
        (None, None, None, None),
        "test_default_environment_resources_are_none_and_omitted"
    );
}

#[test]
fn test_verifier_config_validation() {
    use Expect::*;
    config_case(
        "test_task_level_shared_with_environment_raises",
        "[verifier]\nenvironment_mode = \"shared\"\n[verifier.environment]\n",
        Fails("verifier.environment_mode"),
    );
    config_case(
        "test_step_level_shared_with_environment_raises",
        "[task]\nname = \"org/example\"\n[[steps]]\nname = \"grade\"\n[steps.verifier]\nenvironment_mode = \"shared\"\n[steps.verifier.environment]\ncpus = 2\n",
        Fails("steps[0].verifier.environment_mode"),
    );
    let separate = Loads;
    config_case(
        "test_separate_with_environment_is_valid",
        "[verifier]\nenvironment_mode = \"separate\"\n[verifier.environment]\n",
        separate,
    );
    config_case(
        "test_separate_without_environment_is_valid",
        "[verifier]\nenvironment_mode = \"separate\"\n",
        separate,
    );
    config_case(
        "test_omitted_with_environment_is_valid",
        "[verifier.environment]\n",
        separate,
    );
}

#[test]
fn test_validation_single_step() {
    use Expect::*;
    task_case(
        "test_linux_missing_test_sh_raises",
        &[("task.toml", ""), DOCKERFILE, INSTRUCTION, ("tests/", "")],
        Fails("tests/test.sh"),
    );
    task_case(
        "test_windows_missing_test_bat_raises",
        &[
            ("task.toml", "[environment]\nos = \"windows\"\n"),
            DOCKERFILE,
            INSTRUCTION,
            ("tests/", ""),
        ],
        Fails("tests/test.bat"),
    );
    task_case(
        "test_with_test_sh_passes",
        &[("task.toml", ""), DOCKERFILE, INSTRUCTION, TEST_SH],
        Loads,
    );
    task_case(
        "test_missing_instruction_raises",
        &[("task.toml", ""), DOCKERFILE, TEST_SH],
        Fails("instruction.md"),
    );
    task_case(
        "test_separate_verifier_no_host_test_passes",
        &[
            ("task.toml", "[verifier]\nenvironment_mode = \"separate\"\n"),
            DOCKERFILE,
            INSTRUCTION,
        ],
        Loads,
    );
    task_case(
        "test_separate_verifier_with_explicit_environment_passes",
        &[
            ("task.toml", "[verifier.environment]\nos = \"linux\"\n"),
            DOCKERFILE,
            INSTRUCTION,
        ],
        Loads,
    );
    task_case(
        "test_invalid_toml_returns_false",
        &[("task.toml", "not toml"), DOCKERFILE, INSTRUCTION, TEST_SH],
        Fails("(syntax)"),
    );
    task_case(
        "test_docker_image_only_without_dockerfile_returns_true",
        &[
            (
                "task.toml",
                "[environment]\ndocker_image = \"ubuntu:22.04\"\n",
            ),
            ("environment/", ""),
            INSTRUCTION,
            TEST_SH,
        ],
        Loads,
    );
}

const STEP_INSTRUCTION: (&str, &str) = ("steps/grade/instruction.md", "Step.\n");
/// A Windows task with one shared step and only a Linux `tests/test.sh` (Harbor wants
/// `test.bat`); two of Harbor's test files check it.
const WINDOWS_SHARED_STEP_WITH_TEST_SH: &[(&str, &str)] = &[
    (
        "task.toml",
        "[environment]\nos = \"windows\"\n[[steps]]\nname = \"grade\"\n",
    ),
    DOCKERFILE,
    STEP_INSTRUCTION,
    TEST_SH,
];

#[test]
fn test_validation_multi_step() {
    use Expect::*;
    let steps = "[[steps]]\nname = \"grade\"\n";
    task_case(
        "test_missing_step_directory_raises",
        &[("task.toml", steps), DOCKERFILE],
        Fails("step directory not found"),
    );
    task_case(
        "test_missing_step_instruction_raises",
        &[("task.toml", steps), DOCKERFILE, ("steps/grade/", "")],
        Fails("step instruction not found"),
    );
    task_case(
        "test_windows_shared_step_requires_test_bat",
        WINDOWS_SHARED_STEP_WITH_TEST_SH,
        Fails("test.bat"),
    );
    task_case(
        "test_top_level_test_satisfies_shared_step",
        &[("task.toml", steps), DOCKERFILE, STEP_INSTRUCTION, TEST_SH],
        Loads,
    );
    task_case(
        "test_step_level_test_satisfies_step",
        &[
            ("task.toml", steps),
            DOCKERFILE,
            STEP_INSTRUCTION,
            ("steps/grade/tests/test.sh", "#!/bin/bash\nexit 0\n"),
        ],
        Loads,
    );
}

#[test]
fn test_task_validate_steps_verifier_os() {
    use Expect::*;
    let step_test = ("steps/grade/tests/test.sh", "#!/bin/bash\nexit 0\n");
    task_case(
        "test_separate_step_with_host_test_loads_even_when_agent_os_differs",
        &[
            (
                "task.toml",
                "[environment]\nos = \"windows\"\n[[steps]]\nname = \"grade\"\n[steps.verifier.environment]\nos = \"linux\"\n",
            ),
            DOCKERFILE,
            STEP_INSTRUCTION,
            step_test,
        ],
        Refused(&["windows"]),
    );
    task_case(
        "test_windows_shared_step_rejects_missing_test_bat",
        WINDOWS_SHARED_STEP_WITH_TEST_SH,
        Fails("test.bat"),
    );
    let separate_step = "[environment]\n[[steps]]\nname = \"grade\"\n[steps.verifier]\nenvironment_mode = \"separate\"\n";
    task_case(
        "test_separate_step_with_per_step_test_loads",
        &[
            ("task.toml", separate_step),
            DOCKERFILE,
            STEP_INSTRUCTION,
            step_test,
        ],
        Loads,
    );
    task_case(
        "test_separate_step_with_dockerfile_only_tests_dir_loads",
        &[
            ("task.toml", separate_step),
            DOCKERFILE,
            STEP_INSTRUCTION,
            ("steps/grade/tests/Dockerfile", "FROM ubuntu:22.04\n"),
        ],
        Loads,
    );
    task_case(
        "test_task_level_separate_step_does_not_require_host_test",
        &[
            (
                "task.toml",
                "[verifier]\nenvironment_mode = \"separate\"\n[environment]\n[[steps]]\nname = \"grade\"\n",
            ),
            DOCKERFILE,
            STEP_INSTRUCTION,
        ],
        Loads,
    );
    task_case(
        "test_step_shared_override_under_task_separate_requires_host_test",
        &[
            (
                "task.toml",
                "[verifier]\nenvironment_mode = \"separate\"\n[environment]\n[[steps]]\nname = \"grade\"\n[steps.verifier]\nenvironment_mode = \"shared\"\n",
            ),
            DOCKERFILE,
            STEP_INSTRUCTION,
        ],
        Fails("test.sh"),
    );
    task_case(
        "test_separate_step_falls_back_to_top_level_test",
        &[
            ("task.toml", separate_step),
            DOCKERFILE,
            STEP_INSTRUCTION,
            TEST_SH,
        ],
        Loads,
    );
    task_case(
        "test_mixed_steps_each_validated_against_their_own_verifier_os",
        &[
            (
                "task.toml",
                "[environment]\n[[steps]]\nname = \"build\"\n[[steps]]\nname = \"grade\"\n[steps.verifier.environment]\nos = \"windows\"\n",
            ),
            DOCKERFILE,
            ("steps/build/instruction.md", "Step.\n"),
            STEP_INSTRUCTION,
            TEST_SH,
            ("tests/test.bat", "@echo off\r\nexit /b 0\r\n"),
        ],
        Refused(&["windows"]),
    );
}

#[test]
fn test_task_windows_multistep() {
    use Expect::*;
    let toml =
        "[environment]\nos = \"windows\"\nbuild_timeout_sec = 600\n\n[[steps]]\nname = \"grade\"\n";
    let base = [
        ("task.toml", toml),
        (
            "environment/Dockerfile",
            "FROM mcr.microsoft.com/windows/servercore:ltsc2022\n",
        ),
        ("steps/grade/instruction.md", "Grade it.\n"),
    ];
    let with = |extra: (&'static str, &'static str)| {
        let mut files = base.to_vec();
        files.push(extra);
        files
    };
    let bat = "@echo off\r\nexit /b 0\r\n";
    task_case(
        "test_windows_multi_step_task_accepts_shared_bat_test",
        &with(("tests/test.bat", bat)),
        Refused(&["windows"]),
    );
    task_case(
        "test_windows_multi_step_task_accepts_step_bat_test",
        &with(("steps/grade/tests/test.bat", bat)),
        Refused(&["windows"]),
    );
    task_case(
        "test_windows_multi_step_task_rejects_sh_only_test",
        &with(("steps/grade/tests/test.sh", "#!/bin/bash\nexit 0\n")),
        Fails("test.bat"),
    );
}

#[test]
fn test_task_short_name() {
    let common = "[environment]\ncpus = 1\nmemory_mb = 512\nstorage_mb = 1024\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n";
    let packaged = format!(
        "schema_version = \"1.1\"\n[task]\nname = \"terminal-bench/cancel-async-tasks\"\ndescription = \"test\"\n\
         [[task.authors]]\nname = \"Test\"\nemail = \"t@example.com\"\n{common}"
    );
    let dir = task_dir(&[
        ("task.toml", &packaged),
        DOCKERFILE,
        ("instruction.md", "Do the thing.\n"),
        ("tests/test.sh", "#!/bin/bash\necho 1\n"),
    ]);
    let task = Task::load(dir.path()).unwrap();
    assert_eq!(task.name, "terminal-bench/cancel-async-tasks");
    assert_eq!(task.short_name(), "cancel-async-tasks");

    let dir = task_dir(&[
        (
            "local-task/task.toml",
            &format!("schema_version = \"1.1\"\n{common}"),
        ),
        ("local-task/environment/Dockerfile", "FROM ubuntu:22.04\n"),
        ("local-task/instruction.md", "Do the thing.\n"),
        ("local-task/tests/test.sh", "#!/bin/bash\necho 1\n"),
    ]);
    let task = Task::load(&dir.path().join("local-task")).unwrap();
    assert_eq!(
        (task.name.as_str(), task.short_name()),
        ("local-task", "local-task")
    );
}

#[test]
fn test_local_dataset_scanning_uses_config_aware_validation() {
    let root = task_dir(&[
        (
            "valid-task/task.toml",
            "[verifier]\nenvironment_mode = \"separate\"\n",
        ),
        ("valid-task/environment/Dockerfile", "FROM ubuntu:22.04\n"),
        ("valid-task/instruction.md", "Do it.\n"),
        ("invalid-task/task.toml", ""),
        ("invalid-task/environment/Dockerfile", "FROM ubuntu:22.04\n"),
        ("invalid-task/instruction.md", "Do it.\n"),
        ("invalid-task/tests/", ""),
    ]);
    // Harbor's scan keeps only valid-task (a separate verifier needs no host test script).
    let read = crate::Dataset::read(root.path()).unwrap();
    assert_eq!(read.tasks.len(), 1);
    assert_eq!(read.tasks[0].name, "valid-task");
    assert_eq!(read.skipped.len(), 1);
    let loaded = crate::Dataset::load(root.path()).unwrap();
    assert_eq!(loaded.tasks.len(), 1);
    assert_eq!(loaded.skipped.len(), 1);
}

/// Harbor's own example tasks (examples/tasks/*/task.toml, trimmed to what matters): each is
/// refused naming what it needs, or loads.
#[test]
fn harbor_example_task_configs() {
    use Expect::*;
    let cases = [
        (
            "hello-cuda",
            "[environment]\ncpus = 1\nmemory_mb = 2048\nstorage_mb = 10240\ngpus = 1\ngpu_types = [ \"A100\", \"H100\",]\nmcp_servers = []\n",
            Loads,
        ),
        (
            "hello-mcp",
            "[environment]\ngpus = 0\n[[environment.mcp_servers]]\nname = \"mcp-server\"\ntransport = \"streamable-http\"\nurl = \"http://mcp-server:8000/mcp\"\nargs = []\n",
            Loads,
        ),
        (
            "hello-skills",
            "[environment]\ngpus = 0\nmcp_servers = []\nskills_dir = \"/skills\"\n",
            Loads,
        ),
        (
            "hello-healthcheck",
            "[environment.healthcheck]\ncommand = \"curl -sf http://localhost:8080/\"\ninterval_sec = 2\ntimeout_sec = 5\nstart_period_sec = 5\nstart_interval_sec = 2\nretries = 2\n",
            Loads,
        ),
        (
            "hello-multi-step-advanced",
            "artifacts = [\"/app/greet.sh\"]\n[environment]\nworkdir = \"/app\"\n[[steps]]\nname = \"scaffold\"\nmin_reward = 1.0\n[steps.agent]\ntimeout_sec = 60.0\n\
             [[steps]]\nname = \"implement\"\nmin_reward = 0.5\n[steps.verifier.env]\nEXPECTED_NAME = \"Harbor\"\n[steps.healthcheck]\ncommand = \"test -x /app/greet.sh\"\n",
            Loads,
        ),
        (
            "hello-world-bat",
            "version = \"1.0\"\n[environment]\nos = \"windows\"\nbuild_timeout_sec = 600.0\n",
            Refused(&["windows"]),
        ),
    ];
    for (name, toml, expect) in cases {
        config_case(name, toml, expect);
    }
}
