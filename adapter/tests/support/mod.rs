//! Test support: a `Sandbox` that runs commands on the host (for unit tests of the adapter's
//! logic only; the runner's end-to-end tests use real containers), and task/config fixtures.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use adapter::{AgentRun, InstalledAgentConfig};
use tasks::{ExecOutput, ExecRequest, Sandbox, SandboxError, Task};

/// Runs `bash -c` on the host; container paths are host paths; the user is ignored. Timeouts
/// kill the command's whole process group, as the Docker backend kills the command in the
/// container.
#[derive(Debug, Default)]
pub struct LocalSandbox {
    /// The default working directory.
    pub cwd: PathBuf,
}

impl Sandbox for LocalSandbox {
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let started = Instant::now();
        let mut command = tokio::process::Command::new("bash");
        command
            .arg("-c")
            .arg(&request.command)
            .envs(&request.env)
            .current_dir(
                request
                    .cwd
                    .as_deref()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| self.cwd.clone()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn().map_err(|e| SandboxError::new("exec", e))?;
        let pid = child.id().unwrap_or_default();
        let wait = child.wait_with_output();
        let result = match request.timeout {
            Some(limit) => tokio::time::timeout(limit, wait).await,
            None => Ok(wait.await),
        };
        match result {
            Ok(output) => {
                let output = output.map_err(|e| SandboxError::new("exec", e))?;
                Ok(ExecOutput {
                    exit_code: output.status.code().map(i64::from),
                    stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                    timed_out: false,
                    elapsed: started.elapsed(),
                })
            }
            Err(_) => {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .status();
                Ok(ExecOutput {
                    exit_code: None,
                    timed_out: true,
                    elapsed: started.elapsed(),
                    ..Default::default()
                })
            }
        }
    }

    async fn upload_dir(&self, source: &Path, target: &str) -> Result<(), SandboxError> {
        std::fs::create_dir_all(target).map_err(|e| SandboxError::new("upload_dir", e))?;
        cp_contents(source, Path::new(target)).map_err(|e| SandboxError::new("upload_dir", e))
    }

    async fn upload_bytes(
        &self,
        bytes: Vec<u8>,
        target: &str,
        mode: u32,
    ) -> Result<(), SandboxError> {
        use std::os::unix::fs::PermissionsExt;
        let path = Path::new(target);
        std::fs::create_dir_all(path.parent().unwrap())
            .map_err(|e| SandboxError::new("upload_bytes", e))?;
        std::fs::write(path, bytes).map_err(|e| SandboxError::new("upload_bytes", e))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| SandboxError::new("upload_bytes", e))
    }

    async fn download_dir(&self, source: &str, target: &Path) -> Result<(), SandboxError> {
        std::fs::create_dir_all(target).map_err(|e| SandboxError::new("download_dir", e))?;
        cp_contents(Path::new(source), target).map_err(|e| SandboxError::new("download_dir", e))
    }
}

fn cp_contents(source: &Path, target: &Path) -> std::io::Result<()> {
    let status = std::process::Command::new("cp")
        .arg("-rP")
        .arg(format!("{}/.", source.display()))
        .arg(target)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "cp {} failed",
            source.display()
        )))
    }
}

/// A free port on 127.0.0.1 (loopback only).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The reference agent's source directory in this repository.
pub fn reference_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/reference/src")
}

/// One test's world: temp dirs for the task, trial, workspace, install path and agent state.
pub struct World {
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
        let task_dir = root.join("task");
        std::fs::create_dir_all(task_dir.join("environment")).unwrap();
        std::fs::create_dir_all(task_dir.join("tests")).unwrap();
        std::fs::write(task_dir.join("environment/Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(task_dir.join("tests/test.sh"), "#!/bin/bash\n").unwrap();
        std::fs::write(task_dir.join("instruction.md"), "Do the test thing.\n").unwrap();
        std::fs::write(
            task_dir.join("task.toml"),
            format!("[task]\nname = \"{task_name}\"\n[agent]\ntimeout_sec = 30.0\n"),
        )
        .unwrap();
        for dir in ["workspace", "trial", "state"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("plan.json"), plan).unwrap();
        let task = Task::load(&task_dir).unwrap();
        World {
            tmp,
            task,
            port: free_port(),
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
        }
    }

    /// Kills the world's server, if it runs.
    pub async fn stop_server(&self) {
        let sandbox = LocalSandbox {
            cwd: self.path("workspace"),
        };
        let paths = adapter::installed::server::ServerPaths::new(&self.name);
        let _ = adapter::installed::server::stop(&sandbox, &paths).await;
        let _ = std::fs::remove_dir_all(&paths.dir);
        let _ = std::fs::remove_dir_all(format!("{}-traces", paths.dir));
    }
}
