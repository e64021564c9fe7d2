//! [`FakeSandbox`]: a [`Sandbox`] whose "container" is a host directory, entered per command
//! through a private mount namespace and `chroot`, so command strings run unchanged.
//!
//! # Design
//!
//! Each sandbox owns a temporary directory, its *root*, which stands in for the container's
//! `/`. Every command (and every upload and download, which are `cp -a` commands) runs in a
//! child that, before `exec`:
//!
//! 1. enters a new mount namespace (`unshare(CLONE_NEWNS)`) and makes every mount in it
//!    private, so nothing it mounts is seen by the host or by other sandboxes;
//! 2. bind-mounts each top-level directory of the host (`/usr`, `/etc`, `/tmp`, `/work`, …)
//!    onto the same name under the root, and copies the host's top-level symlinks (`/bin ->
//!    usr/bin`), so programs, libraries and the tests' own temporary directories work as usual;
//! 3. `chroot`s into the root and changes to the working directory.
//!
//! The container's own top-level directories ([`CONTAINER_DIRS`]: `/logs`, `/tests`,
//! `/solution`, `/workspace`) are never bound from the host, so `rm -rf /tests` removes the
//! sandbox's `/tests`, never the machine's, and a path a test forgot about cannot reach the host
//! by accident; anything else a command creates at the top level (`/secret`) lands in the root
//! too. [`FakeSandbox::path`] gives the host path behind a container path, for assertions.
//!
//! This replaces rewriting `/logs` and `/tests` in command strings with a regex: the commands
//! the code under test builds run byte for byte, with real symlink and FIFO semantics.
//!
//! # Requirements and limits
//!
//! - Root (`CAP_SYS_ADMIN`), as the project's CI and development machines run; without it every
//!   command fails with an error saying so. Nothing is skipped.
//! - Not a security boundary and not a container: the network, processes and the host
//!   directories bound in are shared (a command writing `/etc/x` writes the host's); the
//!   requested `user` is not honoured (everything runs as root), and the environment is the
//!   test process's plus the request's.
//! - Downloads copy symlinks and FIFOs as they are (`cp -a`), the most a backend could hand
//!   back, so a test sees whatever the code under test failed to remove before downloading.
//! - A command killed at its deadline is killed with its whole process group, as the Docker
//!   backend kills the command inside the container.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use engine::ExecObserver;
use tasks::isolation::{IsolatedVerifyOutcome, IsolatedVerifyRequest};
use tasks::{ExecOutput, ExecRequest, Sandbox, SandboxError, shell_quote};
use tokio::io::AsyncWriteExt;

use crate::FakeBackend;

/// The container's own top-level directories: never bound from the host, so they exist only
/// in the root once something creates them (as in a fresh container, only `/logs` exists).
pub const CONTAINER_DIRS: [&str; 4] = ["logs", "tests", "solution", "workspace"];

/// The directories the runner creates in every container before the agent starts.
const LOG_DIRS: [&str; 3] = ["logs/agent", "logs/verifier", "logs/artifacts"];

/// A fake container for unit tests; see the module docs for how it works.
pub struct FakeSandbox {
    root: tempfile::TempDir,
    /// Top-level names that resolve to the host (bound directories and copied symlinks).
    host_names: Vec<String>,
    jail: Arc<Jail>,
    workdir: String,
    /// The backend that started this sandbox as an environment's main service, and the
    /// engine's observer of its commands (see [`FakeSandbox::started_by`]).
    started_by: Option<(FakeBackend, ExecObserver)>,
}

impl std::fmt::Debug for FakeSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSandbox")
            .field("root", &self.root.path())
            .field("workdir", &self.workdir)
            .field("started_by_a_backend", &self.started_by.is_some())
            .finish_non_exhaustive()
    }
}

/// What a child does before `exec` to enter the sandbox: prepared in the parent, because
/// between `fork` and `exec` only system calls on ready-made data are safe.
#[derive(Debug)]
struct Jail {
    root: CString,
    /// `(host directory, mount point under the root)`, in mount order.
    binds: Vec<(CString, CString)>,
}

impl FakeSandbox {
    /// A sandbox holding only the runner's `/logs/{agent,verifier,artifacts}`, with `/` as the
    /// working directory.
    pub fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("fake-sandbox-")
            .tempdir()
            .expect("a temporary directory for the fake sandbox");
        let (host_names, binds) = bind_host_dirs(root.path());
        for dir in LOG_DIRS {
            std::fs::create_dir_all(root.path().join(dir)).expect("container directories");
        }
        let jail = Jail {
            root: c_path(root.path()),
            binds,
        };
        FakeSandbox {
            root,
            host_names,
            jail: Arc::new(jail),
            workdir: "/".into(),
            started_by: None,
        }
    }

    /// The sandbox as `backend` starts it: it answers as that backend's container does
    /// (scripted faults, and what the agent did to its container: see
    /// [`crate::backend`]) and reports its commands to `observer`, as a real backend's sandbox
    /// does (output into `trial.log`, time inside commands).
    pub(crate) fn started_by(mut self, backend: FakeBackend, observer: ExecObserver) -> Self {
        self.started_by = Some((backend, observer));
        self
    }

    /// Uses `dir` (a container path) as the working directory of commands that name none.
    pub fn with_workdir(mut self, dir: impl Into<String>) -> Self {
        self.workdir = dir.into();
        self
    }

    /// The host path behind the container path `container`: under the sandbox's root, unless
    /// its first component is one of the host directories bound in (then it is that host path).
    pub fn path(&self, container: &str) -> PathBuf {
        let rel = container.trim_start_matches('/');
        let first = rel.split('/').next().unwrap_or_default();
        if self.host_names.iter().any(|name| name == first) {
            Path::new("/").join(rel)
        } else {
            self.root.path().join(rel)
        }
    }

    /// A command that runs `program args…` inside the sandbox, in `cwd`.
    fn command(&self, program: &str, args: &[&OsStr], cwd: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let jail = Arc::clone(&self.jail);
        let cwd = CString::new(cwd).unwrap_or_else(|_| c"/".into());
        // SAFETY: the closure runs in the forked child before exec and only makes system calls
        // on data prepared here; it allocates nothing (an OS error carries just its code).
        unsafe {
            command.pre_exec(move || jail.enter(&cwd));
        }
        command
    }

    /// Runs `cp -a SOURCE/. TARGET` inside the sandbox (host paths are visible there too).
    async fn copy(&self, operation: &str, source: &str, target: &str) -> Result<(), SandboxError> {
        let script = format!(
            "mkdir -p {target} && cp -a {source}/. {target}",
            source = shell_quote(source),
            target = shell_quote(target)
        );
        self.checked(operation, &script, None).await
    }

    /// Runs `script` with `stdin`, failing unless it exits 0.
    async fn checked(
        &self,
        operation: &str,
        script: &str,
        stdin: Option<Vec<u8>>,
    ) -> Result<(), SandboxError> {
        let mut command = self.command("bash", &["-c".as_ref(), script.as_ref()], "/");
        if stdin.is_some() {
            command.stdin(Stdio::piped());
        }
        let mut child = command.spawn().map_err(|e| spawn_error(operation, e))?;
        if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(&bytes)
                .await
                .map_err(|e| SandboxError::new(operation, e))?;
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| SandboxError::new(operation, e))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(SandboxError::new(
                operation,
                String::from_utf8_lossy(&output.stderr).trim(),
            ))
        }
    }
}

impl Default for FakeSandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Jail {
    /// Enters the sandbox: a private mount namespace, the host directories bound under the
    /// root, then `chroot` and `chdir`. Runs in the child between `fork` and `exec`.
    fn enter(&self, cwd: &CString) -> std::io::Result<()> {
        fn check(result: libc::c_int) -> std::io::Result<()> {
            if result == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        }
        // SAFETY: plain system calls on NUL-terminated strings owned by `self` and `cwd`.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            // Private before anything is mounted, so no mount propagates back to the host.
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for (source, target) in &self.binds {
                check(libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
            }
            check(libc::chroot(self.root.as_ptr()))?;
            check(libc::chdir(cwd.as_ptr()))?;
        }
        Ok(())
    }
}

/// Creates a mount point under `root` for every top-level host directory and a copy of every
/// top-level host symlink, except [`CONTAINER_DIRS`]. Returns the host names and the binds, the
/// directory holding `root` first: bound later, it would carry the other binds in with it.
fn bind_host_dirs(root: &Path) -> (Vec<String>, Vec<(CString, CString)>) {
    let holder = root.components().nth(1).map(|c| c.as_os_str().to_owned());
    let mut names = Vec::new();
    let mut binds = Vec::new();
    for entry in std::fs::read_dir("/").expect("the host's / is readable") {
        let entry = entry.expect("a host top-level entry");
        let name = entry.file_name();
        let Some(text) = name.to_str() else { continue };
        if CONTAINER_DIRS.contains(&text) {
            continue;
        }
        let file_type = entry.file_type().expect("a host top-level entry's type");
        let target = root.join(&name);
        if file_type.is_symlink() {
            let link = std::fs::read_link(entry.path()).expect("a host top-level symlink");
            std::os::unix::fs::symlink(link, &target).expect("copying a top-level symlink");
        } else if file_type.is_dir() {
            std::fs::create_dir(&target).expect("a mount point in the fake root");
            let bind = (c_path(&entry.path()), c_path(&target));
            if Some(&name) == holder.as_ref() {
                binds.insert(0, bind);
            } else {
                binds.push(bind);
            }
        } else {
            continue;
        }
        names.push(text.to_owned());
    }
    (names, binds)
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("paths hold no NUL byte")
}

/// `path` as text for a `cp` command line.
fn utf8<'a>(path: &'a Path, operation: &str) -> Result<&'a str, SandboxError> {
    path.to_str()
        .ok_or_else(|| SandboxError::new(operation, format!("{} is not UTF-8", path.display())))
}

fn spawn_error(operation: &str, error: std::io::Error) -> SandboxError {
    SandboxError::new(
        operation,
        format!(
            "entering the fake sandbox failed: {error} (it needs root, for a mount namespace and chroot)"
        ),
    )
}

impl FakeSandbox {
    /// Runs `request` in the sandbox, killing it (with its process group) at its deadline.
    async fn run(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let started = Instant::now();
        let cwd = request.cwd.as_deref().unwrap_or(&self.workdir);
        let mut command = self.command("bash", &["-c".as_ref(), request.command.as_ref()], cwd);
        command.envs(&request.env);
        let child = command.spawn().map_err(|e| spawn_error("exec", e))?;
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
        .map_err(|e| SandboxError::new("exec", e))?;
        Ok(ExecOutput {
            exit_code: output.status.code().map(i64::from),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            timed_out: false,
            elapsed: started.elapsed(),
        })
    }
}

impl Sandbox for FakeSandbox {
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let Some((backend, observer)) = &self.started_by else {
            return self.run(request).await;
        };
        if let Some(answer) = backend.answer_exec(self, &request) {
            return answer;
        }
        let started = Instant::now();
        let output = self.run(request).await;
        observer.add_exec_time(started.elapsed());
        if let Ok(out) = &output {
            (observer.output)("stdout", out.stdout.as_bytes());
            (observer.output)("stderr", out.stderr.as_bytes());
        }
        output
    }

    async fn upload_dir(&self, source: &Path, target: &str) -> Result<(), SandboxError> {
        let source = utf8(source, "upload_dir")?;
        self.copy(&format!("upload {source} to {target}"), source, target)
            .await
    }

    async fn upload_bytes(
        &self,
        bytes: Vec<u8>,
        target: &str,
        mode: u32,
    ) -> Result<(), SandboxError> {
        let quoted = shell_quote(target);
        let script = format!(
            "mkdir -p \"$(dirname {quoted})\" && cat > {quoted} && chmod {mode:o} {quoted}"
        );
        self.checked(&format!("upload {target}"), &script, Some(bytes))
            .await
    }

    async fn download_dir(&self, source: &str, target: &Path) -> Result<(), SandboxError> {
        if let Some((backend, _)) = &self.started_by
            && backend.hangs_download_of(source)
        {
            std::future::pending::<()>().await;
        }
        let target = utf8(target, "download_dir")?;
        self.copy(&format!("download {source} to {target}"), source, target)
            .await
    }

    async fn verify_isolated(
        &self,
        _request: IsolatedVerifyRequest,
    ) -> Result<IsolatedVerifyOutcome, SandboxError> {
        let scripted = self
            .started_by
            .as_ref()
            .and_then(|(b, _)| b.isolated_outcome());
        // Without one, the sandbox cannot isolate, so the verifier runs the tests by plain exec.
        Ok(scripted.unwrap_or_else(|| {
            IsolatedVerifyOutcome::Unsupported(
                "this sandbox cannot run the verifier isolated".into(),
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn commands_see_the_sandbox_root_and_the_host_programs() {
        let sandbox = FakeSandbox::new();
        let out = sandbox
            .exec(ExecRequest::new(
                "echo hi > /logs/verifier/x && mkdir -p /tests/a && ls / && python3 -c 'print(1)'",
            ))
            .await
            .unwrap();
        assert!(out.success(), "{}", out.stderr);
        assert!(out.stdout.contains("logs\n") && out.stdout.contains("usr\n"));
        assert_eq!(
            std::fs::read_to_string(sandbox.path("/logs/verifier/x")).unwrap(),
            "hi\n"
        );
        assert!(sandbox.path("/tests/a").is_dir());
        // The host has no /tests: the command wrote only the sandbox's.
        assert!(!Path::new("/tests/a").exists());
        assert_eq!(sandbox.path("/tmp/x"), Path::new("/tmp/x"));
    }

    #[tokio::test]
    async fn removing_a_container_dir_never_touches_the_host() {
        let sandbox = FakeSandbox::new();
        let host = tempfile::tempdir().unwrap();
        std::fs::write(host.path().join("keep"), "k").unwrap();
        let out = sandbox
            .exec(ExecRequest::new("rm -rf /logs /tests && touch /secret"))
            .await
            .unwrap();
        assert!(out.success(), "{}", out.stderr);
        assert!(!sandbox.path("/logs").exists());
        assert!(sandbox.path("/secret").is_file());
        assert!(host.path().join("keep").is_file());
    }

    #[tokio::test]
    async fn uploads_and_downloads_resolve_links_inside_the_sandbox() {
        let sandbox = FakeSandbox::new().with_workdir("/tests");
        let host = tempfile::tempdir().unwrap();
        std::fs::write(host.path().join("a.txt"), "a").unwrap();
        sandbox.upload_dir(host.path(), "/tests").await.unwrap();
        sandbox
            .upload_bytes(b"#!/bin/sh\necho ran\n".to_vec(), "/tests/run.sh", 0o755)
            .await
            .unwrap();
        let out = sandbox
            .exec(ExecRequest::new(
                "pwd && /tests/run.sh && cat /tests/a.txt && ln -s /tests /logs/verifier/t",
            ))
            .await
            .unwrap();
        assert_eq!(out.stdout, "/tests\nran\na");
        let back = tempfile::tempdir().unwrap();
        sandbox
            .download_dir("/logs/verifier", back.path())
            .await
            .unwrap();
        let link = std::fs::read_link(back.path().join("t")).unwrap();
        assert_eq!(link, Path::new("/tests"), "links come back as links");
    }

    #[tokio::test]
    async fn a_deadline_kills_the_command_and_its_children() {
        let sandbox = FakeSandbox::new();
        let started = Instant::now();
        let out = sandbox
            .exec(
                ExecRequest::new("sleep 30 & echo $! > /logs/child; sleep 30; echo late")
                    .timeout(Duration::from_millis(500)),
            )
            .await
            .unwrap();
        assert!(out.timed_out && out.exit_code.is_none());
        assert!(started.elapsed() < Duration::from_secs(5));
        let child = std::fs::read_to_string(sandbox.path("/logs/child")).unwrap();
        let stat = format!("/proc/{}/stat", child.trim());
        let gone = (0..50).any(|_| {
            // Gone, or a zombie waiting to be reaped: either way no longer running.
            let state = std::fs::read_to_string(&stat).unwrap_or_default();
            let done = state.is_empty() || state.contains(") Z ");
            if !done {
                std::thread::sleep(Duration::from_millis(50));
            }
            done
        });
        assert!(gone, "the background child was killed with the command");
    }

    #[tokio::test]
    async fn a_failed_copy_is_an_error_naming_the_operation() {
        let sandbox = FakeSandbox::new();
        let host = tempfile::tempdir().unwrap();
        let err = sandbox
            .download_dir("/nowhere", host.path())
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with("download /nowhere"), "{err}");
    }
}
