//! Unit tests of `task.toml` parsing and its checks (Harbor's own cases are in `harbor_cases`).

use super::*;

fn parse(text: &str) -> Result<ParsedConfig, TaskError> {
    parse_task_config(Path::new("t/task.toml"), text)
}

#[test]
fn defaults_follow_harbor() {
    let parsed = parse("").unwrap();
    assert_eq!(parsed.config.verifier.timeout_sec, 600.0);
    assert_eq!(parsed.config.agent.timeout_sec, None);
    assert_eq!(parsed.config.environment.build_timeout_sec, 600.0);
    assert_eq!(
        parsed.config.environment.effective_network(),
        NetworkMode::Public
    );
}

#[test]
fn reads_a_terminal_bench_task() {
    let parsed = parse(
        r#"
schema_version = "1.1"
artifacts = []
[task]
name = "terminal-bench/regex-log"
keywords = ["regex"]
[[task.authors]]
name = "A"
[metadata]
difficulty = "medium"
[verifier]
timeout_sec = 900.0
user = 1000
[agent]
timeout_sec = 1200.0
user = "agent"
[environment]
docker_image = "img:1"
workdir = "/app"
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
allow_internet = false
mcp_servers = []
[environment.env]
PATH = "/app/.venv/bin:/usr/bin"
[environment.healthcheck]
command = "true"
retries = 5
"#,
    )
    .unwrap();
    let c = parsed.config;
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(c.schema_version.as_deref(), Some("1.1"));
    assert_eq!(c.verifier.user, Some(UserSpec::Id(1000)));
    assert_eq!(c.agent.user.unwrap().as_exec_user(), "agent");
    assert_eq!(c.agent.timeout_sec, Some(1200.0));
    assert_eq!(c.environment.cpus, Some(1.0));
    assert_eq!(c.environment.effective_network(), NetworkMode::NoNetwork);
    assert_eq!(c.environment.healthcheck.unwrap().retries, 5);
}

#[test]
fn version_is_the_old_name_of_schema_version() {
    assert_eq!(
        parse("version = \"1.0\"")
            .unwrap()
            .config
            .schema_version
            .as_deref(),
        Some("1.0")
    );
}

#[test]
fn network_mode_wins_over_allow_internet() {
    let c = parse("[environment]\nnetwork_mode = \"public\"\nallow_internet = false")
        .unwrap()
        .config;
    assert_eq!(c.environment.effective_network(), NetworkMode::Public);
    let c = parse("[environment]\nnetwork_mode = \"no-network\"")
        .unwrap()
        .config;
    assert_eq!(c.environment.effective_network(), NetworkMode::NoNetwork);
}

#[test]
fn legacy_sizes_convert_to_mb() {
    assert_eq!(parse_size_mb("2G"), Some(2048));
    assert_eq!(parse_size_mb("512M"), Some(512));
    assert_eq!(parse_size_mb("1048576K"), Some(1024));
    assert_eq!(parse_size_mb("lots"), None);
    let c = parse("[environment]\nmemory = \"4G\"\nstorage = \"10G\"")
        .unwrap()
        .config;
    assert_eq!(c.environment.effective_memory_mb(), Some(4096));
    assert_eq!(c.environment.effective_storage_mb(), Some(10240));
}

#[test]
fn unknown_keys_warn_and_never_fail() {
    let parsed = parse("colour = 1\n[environment]\nflavour = \"x\"").unwrap();
    assert_eq!(parsed.warnings.len(), 2);
    assert!(
        parsed
            .warnings
            .iter()
            .any(|w| w.contains("environment.flavour")),
        "{:?}",
        parsed.warnings
    );
}

#[test]
fn errors_name_file_and_field() {
    let err = parse("[verifier]\ntimeout_sec = \"soon\"")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("t/task.toml"), "{err}");
    assert!(err.contains("verifier.timeout_sec"), "{err}");
    let err = parse("[agent]\ntimeout_sec = -1.0")
        .unwrap_err()
        .to_string();
    assert!(err.contains("agent.timeout_sec"), "{err}");
    let err = parse("[environment]\nmemory = \"lots\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("environment.memory"), "{err}");
    let err = parse("[task]\nname = \"no-org\"").unwrap_err().to_string();
    assert!(err.contains("task.name"), "{err}");
    let err = parse("[environment\n").unwrap_err().to_string();
    assert!(err.contains("(syntax)"), "{err}");
}

fn problem(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn durations_that_would_overflow_are_refused_naming_file_field_and_limit() {
    let err = problem("[agent]\ntimeout_sec = 1e20");
    assert_eq!(
        err,
        "t/task.toml: agent.timeout_sec: 1e20 is out of range: it must be greater than 0 and at most 604800 seconds (1 week)"
    );
    for (toml, field) in [
        ("[verifier]\ntimeout_sec = inf", "verifier.timeout_sec"),
        ("[verifier]\ntimeout_sec = nan", "verifier.timeout_sec"),
        ("[verifier]\ntimeout_sec = 0", "verifier.timeout_sec"),
        (
            "[environment]\nbuild_timeout_sec = 1e300",
            "environment.build_timeout_sec",
        ),
        (
            "[environment.healthcheck]\ncommand = \"true\"\ninterval_sec = -1.0",
            "environment.healthcheck.interval_sec",
        ),
        (
            "[environment.healthcheck]\ncommand = \"true\"\nstart_interval_sec = -0.1",
            "environment.healthcheck.start_interval_sec",
        ),
        (
            "[environment.healthcheck]\ncommand = \"true\"\nstart_period_sec = 1e9",
            "environment.healthcheck.start_period_sec",
        ),
        (
            "[environment.healthcheck]\ncommand = \"true\"\ntimeout_sec = 0",
            "environment.healthcheck.timeout_sec",
        ),
        (
            "[environment.healthcheck]\ncommand = \"true\"\nretries = 100000",
            "environment.healthcheck.retries",
        ),
        (
            "[[steps]]\nname = \"one\"\n[steps.agent]\ntimeout_sec = 1e20",
            "steps[0].agent.timeout_sec",
        ),
        (
            "[verifier.environment]\nbuild_timeout_sec = -5",
            "verifier.environment.build_timeout_sec",
        ),
    ] {
        let err = problem(toml);
        assert!(
            err.starts_with(&format!("t/task.toml: {field}: ")) && err.contains("at most"),
            "{toml}: {err}"
        );
    }
}

#[test]
fn a_healthcheck_that_could_outlast_a_week_is_refused() {
    let err = problem(
        "[environment.healthcheck]\ncommand = \"true\"\ninterval_sec = 3600\ntimeout_sec = 3600\nretries = 10000",
    );
    assert!(
        err.contains("environment.healthcheck:") && err.contains("1 week"),
        "{err}"
    );
    let ok = parse("[environment.healthcheck]\ncommand = \"true\"\ninterval_sec = 0\nretries = 60")
        .unwrap();
    assert_eq!(ok.config.environment.healthcheck.unwrap().interval_sec, 0.0);
}

#[test]
fn sizes_and_counts_are_bounded() {
    for (toml, field) in [
        ("[environment]\ncpus = 0", "environment.cpus"),
        ("[environment]\ncpus = 1e9", "environment.cpus"),
        ("[environment]\ncpus = nan", "environment.cpus"),
        ("[environment]\nmemory_mb = 0", "environment.memory_mb"),
        (
            "[environment]\nmemory_mb = 99999999999",
            "environment.memory_mb",
        ),
        ("[environment]\nmemory = \"1e30G\"", "environment.memory_mb"),
        ("[environment]\nstorage_mb = 0", "environment.storage_mb"),
        ("[environment]\ngpus = 1000", "environment.gpus"),
    ] {
        let err = problem(toml);
        assert!(
            err.starts_with(&format!("t/task.toml: {field}: ")),
            "{toml}: {err}"
        );
    }
    let err = problem("[environment]\nmemory_mb = -1");
    assert!(err.contains("environment.memory_mb"), "{err}");
}

#[test]
fn legacy_sizes_follow_harbor_and_fill_the_mb_fields() {
    let c = parse("[environment]\nmemory = \"1.5g\"\nstorage = \"512M\"")
        .unwrap()
        .config;
    assert_eq!(c.environment.memory_mb, Some(1536));
    assert_eq!(c.environment.storage_mb, Some(512));
    // Harbor wants a unit suffix.
    assert!(problem("[environment]\nmemory = \"2048\"").contains("environment.memory"));
    assert!(problem("[environment]\nstorage = \"nanG\"").contains("environment.storage"));
    let err = problem("[environment]\nmemory = \"1G\"\nmemory_mb = 2048");
    assert!(
        err.contains("environment.memory: Conflicting 'memory' and 'memory_mb'"),
        "{err}"
    );
    let err = problem("[environment]\nstorage = \"1G\"\nstorage_mb = 10");
    assert!(
        err.contains("Conflicting 'storage' and 'storage_mb'"),
        "{err}"
    );
}

#[test]
fn step_names_must_be_plain_and_unique() {
    for name in ["", "..", "a/b", "."] {
        let err = problem(&format!("[[steps]]\nname = {name:?}"));
        assert!(err.contains("steps[0].name"), "{name}: {err}");
    }
    let err = problem("[[steps]]\nname = \"a\"\n[[steps]]\nname = \"a\"");
    assert!(err.contains("steps[1].name"), "{err}");
    let err = problem("[[steps]]\nname = \"a\"\nmin_reward = nan");
    assert!(err.contains("steps[0].min_reward"), "{err}");
}

#[test]
fn harbor_features_are_parsed_into_types() {
    let c = parse(
        r#"
multi_step_reward_strategy = "final"
artifacts = ["/app/out.txt", { source = "/app/dir", destination = "d", exclude = ["*.pyc"] }]
[environment]
os = "Linux"
skills_dir = "/skills"
[[environment.mcp_servers]]
name = "m"
transport = "http"
url = "http://m:8000/mcp"
[verifier]
environment_mode = "separate"
[verifier.environment]
cpus = 2
[[steps]]
name = "one"
min_reward = { reward = 0.5 }
[steps.healthcheck]
command = "true"
"#,
    )
    .unwrap()
    .config;
    assert_eq!(
        c.multi_step_reward_strategy,
        Some(MultiStepRewardStrategy::Final)
    );
    assert_eq!(c.artifacts[0], Artifact::Path("/app/out.txt".into()));
    assert!(matches!(&c.artifacts[1], Artifact::Spec { exclude, .. } if exclude == &["*.pyc"]));
    assert_eq!(c.environment.target_os(), TaskOs::Linux);
    assert_eq!(
        c.environment.mcp_servers[0].transport,
        McpTransport::StreamableHttp
    );
    assert_eq!(
        c.verifier.declared_mode(),
        Some(VerifierEnvironmentMode::Separate)
    );
    assert_eq!(c.verifier.environment.unwrap().cpus, Some(2.0));
    assert_eq!(
        c.steps[0].min_reward,
        Some(MinReward::PerKey([("reward".to_owned(), 0.5)].into()))
    );
}

#[test]
fn required_fields_follow_harbor() {
    assert!(
        problem("[environment.healthcheck]\ninterval_sec = 1").contains("environment.healthcheck")
    );
    assert!(problem("[[steps]]\nagent = {}").contains("steps[0]"));
    assert!(problem("[task]\ndescription = \"x\"").contains("task"));
    assert!(
        problem("[task]\nname = \"a/b\"\n[[task.authors]]\nemail = \"e\"").contains("task.authors")
    );
    assert!(problem("[task]\nname = \".a/b\"").contains("task.name"));
    assert!(problem("[task]\nname = \"a/../b\"").contains("task.name"));
}

#[test]
fn schema_1_4_fields_parse_without_warnings() {
    let parsed = parse(
        r#"
schema_version = "1.4"
artifacts = [{ source = "/var/lib/db/dump.sql", service = " db ", destination = "db" }]
[task]
name = "org/collect"
version = "2.1.0"
[[verifier.collect]]
command = "pg_dump > /var/lib/db/dump.sql"
service = "db"
timeout_sec = 30
user = "postgres"
[[verifier.collect]]
command = "cp /app/state /logs/artifacts/"
[[environment.mcp_servers]]
name = "web"
transport = "http"
url = "http://web:8000/mcp"
headers = { Authorization = "Bearer ${MCP_TOKEN}", X-Team = "red" }
[[steps]]
name = "one"
[[steps.verifier.collect]]
command = "true"
service = "db"
"#,
    )
    .unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let c = parsed.config;
    assert_eq!(c.task.unwrap().version.as_deref(), Some("2.1.0"));
    let hooks = &c.verifier.collect;
    assert_eq!(
        (hooks[0].service.as_str(), hooks[0].timeout_sec),
        ("db", 30.0)
    );
    assert!(hooks[1].on_main());
    assert_eq!(hooks[1].timeout_sec, 60.0);
    assert_eq!(c.steps[0].verifier.collect[0].service, "db");
    // The service name is trimmed, as Harbor's validator returns it.
    assert!(
        matches!(&c.artifacts[0], Artifact::Spec { service: Some(s), .. } if s == "db"),
        "{:?}",
        c.artifacts
    );
    let server = &c.environment.mcp_servers[0];
    assert_eq!(server.headers["Authorization"], "Bearer ${MCP_TOKEN}");
}

#[test]
fn schema_1_4_fields_are_validated_as_harbor_validates_them() {
    let cases = [
        ("[task]\nname = \"o/n\"\nversion = \"\"\n", "task.version"),
        (
            "[[verifier.collect]]\ncommand = \"x\"\nservice = \"-db\"\n",
            "verifier.collect[0].service",
        ),
        (
            "[[verifier.collect]]\ncommand = \"x\"\ntimeout_sec = 0\n",
            "verifier.collect[0].timeout_sec",
        ),
        (
            "artifacts = [{ source = \"out/dump.sql\", service = \"db\" }]\n",
            "artifacts[0].source",
        ),
        (
            "artifacts = [\"/app/../etc/passwd\"]\n",
            "artifacts[0].source",
        ),
        (
            "[[steps]]\nname = \"s\"\nartifacts = [{ source = \"/x\", service = \"a b\" }]\n",
            "steps[0].artifacts[0].service",
        ),
        (
            "[[environment.mcp_servers]]\nname = \"l\"\ntransport = \"stdio\"\ncommand = \"t\"\nheaders = { X-A = \"b\" }\n",
            "environment.mcp_servers[0].headers",
        ),
        (
            "[[environment.mcp_servers]]\nname = \"w\"\nurl = \"http://w\"\nheaders = { Authorization = \"Bearer abc\" }\n",
            "environment.mcp_servers[0].headers",
        ),
    ];
    for (text, field) in cases {
        let message = problem(text);
        assert!(
            message.contains("t/task.toml") && message.contains(field),
            "{text}: {message}"
        );
    }
    // `main` and no service both mean the agent's container, where a relative path is fine.
    parse("artifacts = [{ source = \"out.txt\", service = \"main\" }]\n").unwrap();
}
