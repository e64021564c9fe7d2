//! A host-side `Sandbox` for tests: runs `bash -c` on the host, with container paths
//! (`/logs/...`, `/tests`) mapped under a temporary root, so the verifier's real command
//! sequence, hardening and download logic run without Docker.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::Instant;

use regex::Regex;
use tasks::sandbox::{ExecOutput, ExecRequest, Sandbox, SandboxError};

static CONTAINER_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(^|[\s"'(=;])(/logs|/tests)\b"#).unwrap());

/// The fake container: its filesystem is `root`.
pub struct HostSandbox {
    /// Stands in for the container's `/`.
    pub root: PathBuf,
}

impl HostSandbox {
    /// A sandbox rooted at `root`, with `/logs/verifier` created as the runner would.
    pub fn new(root: &Path) -> Self {
        std::fs::create_dir_all(root.join("logs/verifier")).unwrap();
        HostSandbox {
            root: root.to_path_buf(),
        }
    }

    /// The host path standing in for a container path.
    pub fn path(&self, container: &str) -> PathBuf {
        self.root.join(container.trim_start_matches('/'))
    }

    fn map(&self, command: &str) -> String {
        let root = self.root.display().to_string();
        let mapped = CONTAINER_PATH
            .replace_all(command, |c: &regex::Captures| {
                format!("{}{root}{}", &c[1], &c[2])
            })
            .into_owned();
        // A missed path would make `rm -rf /tests` run against the real host: refuse loudly.
        assert!(
            !CONTAINER_PATH.is_match(&mapped),
            "unmapped container path in {mapped}"
        );
        mapped
    }
}

fn run(program: &str, args: &[&Path]) -> Result<(), SandboxError> {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .map_err(|e| SandboxError::new(program, e))?;
    if status.success() {
        Ok(())
    } else {
        Err(SandboxError::new(program, status))
    }
}

impl Sandbox for HostSandbox {
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let started = Instant::now();
        let child = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(self.map(&request.command))
            .env("ROOT", &self.root)
            .envs(&request.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| SandboxError::new("spawn bash", e))?;
        let pid = child.id().expect("a just-spawned child has a pid") as i32;
        let wait = child.wait_with_output();
        let output = match request.timeout {
            Some(limit) => match tokio::time::timeout(limit, wait).await {
                Ok(output) => output,
                Err(_) => {
                    // SAFETY: plain syscall; the group is the one this call created.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    return Ok(ExecOutput {
                        exit_code: None,
                        timed_out: true,
                        elapsed: started.elapsed(),
                        ..Default::default()
                    });
                }
            },
            None => wait.await,
        }
        .map_err(|e| SandboxError::new("wait for bash", e))?;
        Ok(ExecOutput {
            exit_code: output.status.code().map(i64::from),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            timed_out: false,
            elapsed: started.elapsed(),
        })
    }

    async fn upload_dir(&self, source: &Path, target: &str) -> Result<(), SandboxError> {
        let target = self.path(target);
        std::fs::create_dir_all(&target).map_err(|e| SandboxError::new("mkdir", e))?;
        run("cp", &[Path::new("-r"), &source.join("."), &target])
    }

    async fn upload_bytes(
        &self,
        bytes: Vec<u8>,
        target: &str,
        _mode: u32,
    ) -> Result<(), SandboxError> {
        let target = self.path(target);
        std::fs::create_dir_all(target.parent().unwrap())
            .map_err(|e| SandboxError::new("mkdir", e))?;
        std::fs::write(target, bytes).map_err(|e| SandboxError::new("write", e))
    }

    async fn download_dir(&self, source: &str, target: &Path) -> Result<(), SandboxError> {
        std::fs::create_dir_all(target).map_err(|e| SandboxError::new("mkdir", e))?;
        // `cp -a` recreates symlinks and FIFOs as they are, like an archive download does.
        run(
            "cp",
            &[Path::new("-a"), &self.path(source).join("."), target],
        )
    }
}

/// Writes a minimal task whose tests/test.sh is `test_sh`, with extra task.toml lines.
pub fn make_task(dir: &Path, test_sh: &str, extra_toml: &str) -> tasks::Task {
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(
        dir.join("task.toml"),
        format!("[task]\nname = \"test/verify\"\n{extra_toml}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("instruction.md"), "Do nothing.\n").unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM scratch\n").unwrap();
    std::fs::write(
        dir.join("tests/test.sh"),
        format!("#!/bin/bash\n{test_sh}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("tests/helper.txt"), "uploaded with the tests\n").unwrap();
    tasks::Task::load(dir).unwrap()
}
