//! The installed-agent adapter driven end to end against the reference agent's real server,
//! running under `testkit`'s fake sandbox (loopback only, a random free port per test).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use adapter::installed::transport::{InContainerHttp, TransportError};
use adapter::{
    Agent, AgentConfigError, AgentError, AgentErrorKind, AgentRun, AgentRunReport, InstalledAgent,
    InstalledAgentConfig,
};
use serde_json::Value;
use tasks::Task;
use testkit::{FakeSandbox, TaskFixture};

const PLAN: &str = r#"{
  "t/hello": {"steps": [{"thought": "write it", "command": "echo 'Hello, world!' > hello.txt && cat hello.txt"}]},
  "t/sleep": {"steps": [{"command": "sleep 30; touch finished.txt"}]},
  "t/fail": {"steps": [{"command": "echo about to fail; exit 3"}]},
  "t/die": {"steps": [{"command": "kill -9 $PPID; sleep 5"}]},
  "t/echo": {"steps": [{"command": "true"}]}
}"#;

/// Asserts the error's kind and that its message says `text`.
fn assert_agent_error(err: &AgentError, kind: AgentErrorKind, text: &str) {
    assert_eq!(err.kind, kind, "{}", err.message);
    assert!(err.message.contains(text), "{}", err.message);
}

/// The trajectory's first step that made a tool call.
fn first_call_step(trajectory: &Value) -> &Value {
    trajectory["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s.get("tool_calls").is_some())
        .expect("a step with a tool call")
}

fn read_json(path: std::path::PathBuf) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

#[tokio::test]
async fn runs_a_task_to_completion_with_all_records() {
    let world = World::new("hello", "t/hello", PLAN);
    let (agent, sandbox) = world.agent(None);
    let run = world.full_run();
    let version = agent.setup(&sandbox, &run).await.unwrap();
    assert_eq!(
        version.as_deref(),
        Some("1.0.0"),
        "learnt from version_command"
    );
    let report = agent.run(&sandbox, &run, &world.task.instruction).await;
    world.stop_server().await;
    let report = report.unwrap();

    assert_eq!(
        std::fs::read_to_string(world.path("workspace/hello.txt")).unwrap(),
        "Hello, world!\n"
    );
    let trial = world.path("trial/agent");
    let provenance = read_json(trial.join("source-provenance.json"));
    assert_eq!(
        provenance["predicate"]["archive"]["sha256"],
        agent.source_provenance().tar_sha256()
    );
    assert!(
        world.path("install/server.py").is_file(),
        "source unpacked at the install path"
    );
    assert_eq!(
        std::fs::read_to_string(trial.join("instruction.txt")).unwrap(),
        world.task.instruction
    );
    for i in 0..2 {
        assert_eq!(
            std::fs::read_to_string(trial.join(format!("setup/command-{i}/return-code.txt")))
                .unwrap(),
            "0\n"
        );
    }
    assert!(
        std::fs::read_to_string(trial.join("setup/command-1/stdout.txt"))
            .unwrap()
            .contains(&*world.path("install").to_string_lossy())
    );
    let log = std::fs::read_to_string(trial.join("server.log")).unwrap();
    assert!(
        log.contains("listening on 127.0.0.1") && log.contains("POST /api/tasks"),
        "{log}"
    );
    assert!(trial.join("traces/events.jsonl").is_file());

    let trajectory = read_json(trial.join("trajectory.json"));
    assert!(tasks::atif::validate_value(&trajectory).is_empty());
    assert_eq!(trajectory["agent"]["name"], agent.name());
    assert_eq!(trajectory["steps"][0]["message"], world.task.instruction);
    let call_step = first_call_step(&trajectory);
    assert_eq!(
        call_step["observation"]["results"][0]["content"],
        "Hello, world!\n[exit code: 0]"
    );

    let metadata = report.context.unwrap().metadata.unwrap();
    assert_eq!(metadata["final_status"], "completed");
    assert_eq!(metadata["succeeded"], true);
    assert_eq!(
        read_json(trial.join("task-status.json"))["status"],
        "completed"
    );
}

#[tokio::test]
async fn cancels_at_the_deadline_and_kills_the_running_command() {
    let world = World::new("sleep", "t/sleep", PLAN);
    let (agent, sandbox) = world.agent(None);
    let run = world.run(Duration::from_secs(30), None);
    agent.setup(&sandbox, &run).await.unwrap();
    let run = adapter::AgentRun {
        run_deadline: Some(Instant::now() + Duration::from_secs(2)),
        agent_timeout_sec: Some(2.0),
        ..run
    };
    let started = Instant::now();
    let err = agent
        .run(&sandbox, &run, &world.task.instruction)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_agent_error(&err, AgentErrorKind::Timeout, "timed out after 2 seconds");
    assert!(
        took < Duration::from_secs(10),
        "cancel must not wait for the command: {took:?}"
    );
    let context = err
        .context
        .expect("a timeout still carries the agent context");
    assert_eq!(context.metadata.unwrap()["final_status"], "cancelled");
    // The server is still up (it keeps running through verification by default).
    let http = InContainerHttp::new(world.port);
    let health = http
        .request(&sandbox, "GET", "/health", None, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(health.status, 200);
    let trajectory = read_json(world.path("trial/agent/trajectory.json"));
    assert!(tasks::atif::validate_value(&trajectory).is_empty());
    assert!(trajectory["notes"].as_str().unwrap().contains("cancelled"));
    // Ordered by the agent's own events, not by waiting: it reports `cancelled` only after the
    // command's process tree has exited and its result is logged, so SIGKILL ended the
    // command (exit code -9) and nothing of it is left to write finished.txt.
    let call_step = first_call_step(&trajectory);
    assert_eq!(
        call_step["observation"]["results"][0]["content"], "[exit code: -9]",
        "the command was killed, not left to finish: {call_step}"
    );
    assert!(!world.path("workspace/finished.txt").exists());
    world.stop_server().await;
}

#[tokio::test]
async fn a_failed_task_is_an_ordinary_outcome() {
    let world = World::new("fail", "t/fail", PLAN);
    let report = world.run_task().await;
    let metadata = report.unwrap().context.unwrap().metadata.unwrap();
    assert_eq!(metadata["final_status"], "failed");
    assert_eq!(metadata["succeeded"], false);
}

#[tokio::test]
async fn a_server_that_crashes_on_start_is_a_server_error_with_its_log() {
    let world = World::new("crash", "t/echo", PLAN);
    let (err, took) = world
        .failed_setup(
            "echo boom: cannot bind >&2; exit 3",
            Duration::from_secs(30),
        )
        .await;
    assert_agent_error(
        &err,
        AgentErrorKind::Server,
        "exited before it became healthy",
    );
    assert!(took < Duration::from_secs(10));
    let log = std::fs::read_to_string(world.path("trial/agent/server.log")).unwrap();
    assert!(log.contains("boom: cannot bind"), "{log}");
    world.stop_server().await;
}

#[tokio::test]
async fn a_server_that_never_becomes_healthy_fails_at_the_setup_deadline() {
    let world = World::new("never", "t/echo", PLAN);
    let (err, took) = world
        .failed_setup("echo starting; sleep 300", Duration::from_secs(6))
        .await;
    world.stop_server().await;
    assert_agent_error(&err, AgentErrorKind::Server, "never became healthy");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(6),
        "stops before the runner's deadline: {took:?}"
    );
    assert!(
        std::fs::read_to_string(world.path("trial/agent/server.log"))
            .unwrap()
            .contains("starting")
    );
}

#[tokio::test]
async fn a_slow_starting_server_is_waited_for() {
    let world = World::new("slow", "t/echo", PLAN);
    let cmd = format!(
        "sleep 1.5; exec python3 {{source_dir}}/server.py --port {{port}} --plan {} --state-dir {}",
        world.path("plan.json").display(),
        world.path("state").display()
    );
    let (agent, sandbox) = world.agent(Some(&cmd));
    let run = world.full_run();
    let setup = agent.setup(&sandbox, &run).await;
    let report = match setup {
        Ok(_) => agent.run(&sandbox, &run, "anything").await,
        Err(e) => Err(e),
    };
    world.stop_server().await;
    assert_eq!(
        report.unwrap().context.unwrap().metadata.unwrap()["final_status"],
        "completed"
    );
}

#[tokio::test]
async fn a_server_that_dies_mid_run_is_a_server_error() {
    let world = World::new("die", "t/die", PLAN);
    let err = world.run_task().await.unwrap_err();
    assert_agent_error(&err, AgentErrorKind::Server, "no longer running");
    assert!(world.path("trial/agent/server.log").is_file());
}

#[tokio::test]
async fn transport_round_trips_large_bodies_and_reports_refused_connections() {
    let world = World::new("transport", "t/echo", PLAN);
    let (agent, sandbox) = world.agent(None);
    let run = world.full_run();
    agent.setup(&sandbox, &run).await.unwrap();
    // Larger than the env-var path: travels as an uploaded body file. Non-ASCII on purpose:
    // Content-Length counts bytes.
    let instruction = format!("Ünïcode first line\n{}\nend", "x".repeat(150_000));
    let report = agent.run(&sandbox, &run, &instruction).await;
    let http = InContainerHttp::new(world.port);
    let missing = http
        .request(
            &sandbox,
            "GET",
            "/api/tasks/nope",
            None,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    world.stop_server().await;
    report.unwrap();
    let trajectory = read_json(world.path("trial/agent/trajectory.json"));
    assert_eq!(
        trajectory["steps"][0]["message"],
        instruction.as_str(),
        "the agent got the instruction byte for byte"
    );
    assert_eq!(missing.status, 404);

    let closed = InContainerHttp::new(testkit::free_port());
    let err = closed
        .request(&sandbox, "GET", "/health", None, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, TransportError::Connect { .. }), "{err}");
}

#[tokio::test]
async fn an_invalid_event_log_is_a_trajectory_error_of_the_trial() {
    let world = World::new("badlog", "t/echo", PLAN);
    // A "server" whose task writes a broken event log: a result for a call that never happened.
    let script = world.path("fake.sh");
    std::fs::write(
        &script,
        format!(
            "mkdir -p {state}/tasks/task-1-fixed && echo '{{\"type\":\"tool_result\",\"call_id\":\"ghost\"}}' > {state}/tasks/task-1-fixed/events.jsonl\n\
             exec python3 {{source_dir}}/server.py --port {{port}} --plan {plan} --state-dir {state}-real --instance fixed\n",
            state = world.path("state").display(),
            plan = world.path("plan.json").display()
        ),
    )
    .unwrap();
    let cmd = std::fs::read_to_string(&script)
        .unwrap()
        .replace('\n', "; ");
    let (agent, sandbox) = world.agent(Some(&cmd));
    let run = world.full_run();
    agent.setup(&sandbox, &run).await.unwrap();
    let err = agent.run(&sandbox, &run, "go").await.unwrap_err();
    world.stop_server().await;
    assert_agent_error(&err, AgentErrorKind::Trajectory, "ghost");
    assert!(err.kind.continues_to_verification());
    assert!(
        !world.path("trial/agent/trajectory.json").exists(),
        "no silent invalid file"
    );
    assert!(world.path("trial/agent/trajectory-error.txt").is_file());
}

#[test]
fn secret_boundary_refuses_credentials_unless_opted_in() {
    let world = World::new("secrets", "t/echo", PLAN);
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";
    let env = BTreeMap::from([
        ("HELPER".to_owned(), key.to_owned()),
        ("MODEL".to_owned(), "m".to_owned()),
    ]);
    let err = InstalledAgent::new(world.config(None), env.clone(), false, false).unwrap_err();
    assert!(matches!(err, AgentConfigError::Secret { .. }));
    testkit::assert_names_but_hides(
        &err.to_string(),
        &["HELPER", "--allow-container-secrets"],
        key,
    );

    let agent = InstalledAgent::new(world.config(None), env, true, false).unwrap();
    assert!(agent.allow_container_secrets());
    let job = agent.job_config();
    assert_eq!(job.name.as_deref(), Some(agent.name()));
    assert_eq!(job.env["MODEL"], "m");
    assert_eq!(job.env["HELPER"], adapter::secrets::REDACTED);
    assert!(!serde_json::to_string(&job).unwrap().contains(key));
}

#[test]
fn a_credential_value_inside_the_source_is_refused() {
    let world = World::new("planted", "t/echo", PLAN);
    let src = world.path("src");
    std::fs::create_dir_all(&src).unwrap();
    let value = "planted-value-0123456789";
    std::fs::write(src.join("settings.py"), format!("TOKEN = '{value}'\n")).unwrap();
    let text = world.config_text(None).replace(
        &reference_src().display().to_string(),
        &src.display().to_string(),
    );
    let file = world.path("agent.toml");
    std::fs::write(&file, text).unwrap();
    let config = InstalledAgentConfig::load(&file).unwrap();
    let env = BTreeMap::from([("SERVICE_TOKEN".to_owned(), value.to_owned())]);
    let err = InstalledAgent::new(config, env, true, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("settings.py") && err.contains("SERVICE_TOKEN"),
        "{err}"
    );
    assert!(!err.contains(value), "{err}");
}

#[test]
fn the_reference_config_loads_and_its_suffix_is_exposed() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/reference/agent.toml");
    let config = InstalledAgentConfig::load(&path).unwrap();
    assert_eq!(config.name, "reference-agent");
    assert!(config.source_dir().join("server.py").is_file());
    assert!(config.source_dir().join("plan.json").is_file());
    let agent = InstalledAgent::new(config, BTreeMap::new(), false, false).unwrap();
    assert_eq!(agent.instruction_suffix(), None);
    assert_eq!(agent.instruction_text("x\n"), "x\n");
    assert_eq!(agent.job_config().kwargs["reasoning_effort"], "none");
}

#[test]
fn provenance_records_the_runner_version() {
    // provenance states its own (workspace) version so it need not depend on tasks for it.
    assert_eq!(provenance::GENERATOR_VERSION, tasks::RUNNER_VERSION);
}

/// The reference agent's source directory in this repository.
fn reference_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/reference/src")
}

/// One test's world: temp dirs for the task, trial, workspace, install path and agent state.
struct World {
    /// Holds everything.
    pub tmp: tempfile::TempDir,
    /// The task.
    pub task: Task,
    /// The port the server listens on.
    pub port: u16,
    /// The agent name (unique per test so state dirs never collide).
    pub name: String,
}

impl World {
    /// A world for task `task_name` with a test plan.
    pub fn new(test: &str, task_name: &str, plan: &str) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let task = TaskFixture::new(task_name)
            .instruction("Do the test thing.\n")
            .toml("[agent]\ntimeout_sec = 30.0")
            .write(&root.join("task"));
        for dir in ["workspace", "trial", "state"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("plan.json"), plan).unwrap();
        World {
            tmp,
            task,
            port: testkit::free_port(),
            name: format!("reftest-{test}-{}", std::process::id()),
        }
    }

    /// A path inside the world.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// Config text for the reference agent with this world's paths; `server_command` overrides
    /// the start command when given.
    pub fn config_text(&self, server_command: Option<&str>) -> String {
        let p = |rel: &str| self.path(rel).display().to_string();
        let command = server_command.map(str::to_owned).unwrap_or_else(|| {
            format!(
                "python3 {{source_dir}}/server.py --port {{port}} --plan {} --state-dir {}",
                p("plan.json"),
                p("state")
            )
        });
        format!(
            r#"name = "{name}"
version_command = "python3 {{source_dir}}/server.py --version"
model_name = "none/scripted-plan"
workspace_root = "{ws}"
[source]
dir = "{src}"
install_path = "{install}"
[install]
commands = ["python3 --version", "echo installing to {{source_dir}}"]
[server]
command = "{command}"
port = {port}
[api]
final_statuses = ["completed", "failed", "cancelled"]
success_statuses = ["completed"]
poll_interval_sec = 0.1
poll_max_interval_sec = 0.5
cancel_grace_sec = 5.0
[traces]
files = ["{state}/tasks/{{task_id}}/events.jsonl"]
[trajectory]
format = "events"
file = "events.jsonl"
"#,
            name = self.name,
            src = reference_src().display(),
            install = p("install"),
            command = command.replace('\\', "\\\\").replace('"', "\\\""),
            port = self.port,
            state = p("state"),
            ws = p("workspace"),
        )
    }

    /// The parsed config.
    pub fn config(&self, server_command: Option<&str>) -> InstalledAgentConfig {
        let text = self.config_text(server_command);
        let file = self.path("agent.toml");
        std::fs::write(&file, &text).unwrap();
        InstalledAgentConfig::load(&file).unwrap()
    }

    /// An `AgentRun` with the given setup and run budgets.
    pub fn run(&self, setup: Duration, run: Option<Duration>) -> AgentRun<'_> {
        AgentRun {
            task: &self.task,
            trial_dir: self.path("trial"),
            user: None,
            setup_deadline: Instant::now() + setup,
            run_deadline: run.map(|d| Instant::now() + d),
            agent_timeout_sec: run.map(|d| d.as_secs_f64()),
            step: None,
            end_turn: None,
        }
    }

    /// The reference agent (its server started by `server_command` when given) and a fake
    /// sandbox to drive it in.
    fn agent(&self, server_command: Option<&str>) -> (InstalledAgent, FakeSandbox) {
        let config = self.config(server_command);
        let agent = InstalledAgent::new(config, BTreeMap::new(), false, false).unwrap();
        (agent, self.sandbox())
    }

    /// An `AgentRun` with 30 seconds to set up and 30 seconds to run.
    /// Setup of an agent whose server runs `server_command`, with a `setup` deadline, that
    /// must fail: the error and how long setup took.
    async fn failed_setup(&self, server_command: &str, setup: Duration) -> (AgentError, Duration) {
        let (agent, sandbox) = self.agent(Some(server_command));
        let run = self.run(setup, None);
        let started = Instant::now();
        let err = agent.setup(&sandbox, &run).await.unwrap_err();
        (err, started.elapsed())
    }

    /// Sets up the reference agent's server, runs the task's instruction and stops the server.
    async fn run_task(&self) -> Result<AgentRunReport, AgentError> {
        let (agent, sandbox) = self.agent(None);
        let run = self.full_run();
        agent.setup(&sandbox, &run).await.unwrap();
        let report = agent.run(&sandbox, &run, &self.task.instruction).await;
        self.stop_server().await;
        report
    }

    fn full_run(&self) -> AgentRun<'_> {
        self.run(Duration::from_secs(30), Some(Duration::from_secs(30)))
    }

    /// A fake sandbox whose commands run in this world's workspace. The world's paths are host
    /// paths, which the fake sandbox shows at the same place.
    pub fn sandbox(&self) -> FakeSandbox {
        FakeSandbox::new().with_workdir(self.path("workspace").display().to_string())
    }

    /// Kills the world's server, if it runs.
    pub async fn stop_server(&self) {
        let sandbox = self.sandbox();
        let paths = adapter::installed::server::ServerPaths::new(&self.name);
        let _ = adapter::installed::server::stop(&sandbox, &paths).await;
        let _ = std::fs::remove_dir_all(&paths.dir);
        let _ = std::fs::remove_dir_all(format!("{}-traces", paths.dir));
    }
}
