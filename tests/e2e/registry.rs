//! A real image registry for the image tests: Debian's `docker-registry` (the distribution
//! registry) on a free loopback port with a temporary config and storage, optionally behind
//! htpasswd auth, and a tiny loopback proxy in front of it that fails the first requests.
//! The engine trusts `127.0.0.1:PORT` registries without TLS.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testkit::free_port;

use crate::support::ensure_base_image;

/// A running registry; stopped when dropped.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry; with `login`, it requires that user and password (htpasswd).
    pub fn start(login: Option<(&str, &str)>) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = login {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .expect("htpasswd (apache2-utils) is installed; .ci/run installs it");
            assert!(out.status.success(), "htpasswd failed");
            std::fs::write(dir.path().join("htpasswd"), &out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: runner-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect(
                "docker-registry is installed (apt-get install -y docker-registry; .ci/run does)",
            );
        let registry = Registry { child, addr, dir };
        registry.wait_ready();
        registry
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(head) = http_get(&self.addr, "/v2/")
                && (head.contains(" 200 ") || head.contains(" 401 "))
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "the registry on {} did not answer; its log:\n{}",
            self.addr,
            self.log()
        );
    }

    /// The registry's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status line and headers of `GET path` on `addr`, or `None` when nothing answers.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

/// `docker …` with an optional client config dir; panics with its output on failure.
pub fn docker(args: &[&str], config: Option<&Path>) -> String {
    let mut command = Command::new("docker");
    if let Some(dir) = config {
        command.arg("--config").arg(dir);
    }
    let out = command.args(args).output().expect("the docker CLI runs");
    assert!(
        out.status.success(),
        "docker {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Logs `config` (a client config dir) in to the registry at `addr`.
pub fn login(addr: &str, user: &str, password: &str, config: &Path) {
    let mut child = Command::new("docker")
        .arg("--config")
        .arg(config)
        .args(["login", "-u", user, "--password-stdin", addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(password.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "docker login: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A unique lowercase suffix for names.
pub fn unique() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Pushes to `reference` (at `registry`) an image made from the offline base image with
/// `/marker` holding `marker`, removes the local copy, and returns the manifest digest the
/// registry answered.
pub fn push_marker_image(reference: &str, marker: &str, config: Option<&Path>) -> String {
    ensure_base_image();
    let container = format!("runner-e2e-push-{}", unique());
    docker(
        &[
            "run",
            "--name",
            &container,
            "runner-base:bookworm-py",
            "sh",
            "-c",
            &format!("echo {marker} > /marker"),
        ],
        None,
    );
    docker(&["commit", &container, reference], None);
    docker(&["rm", &container], None);
    let pushed = docker(&["push", reference], config);
    docker(&["rmi", reference], None);
    let digest = pushed
        .split_whitespace()
        .skip_while(|w| *w != "digest:")
        .nth(1)
        .unwrap_or_else(|| panic!("no digest in docker push's output:\n{pushed}"));
    digest.to_owned()
}

/// True when the engine has `reference`.
pub fn image_present(reference: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", reference])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A loopback proxy in front of a registry that answers the first `fail` requests with 503 and
/// forwards the rest, recording every request line.
pub struct FlakyProxy {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Request lines in arrival order, with the status the proxy gave (`503` or `fwd`).
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl FlakyProxy {
    /// Starts the proxy in front of `upstream`.
    pub fn start(upstream: &str, fail: usize) -> FlakyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let upstream = upstream.to_owned();
        let count = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (upstream, seen, count) = (upstream.clone(), seen.clone(), count.clone());
                std::thread::spawn(move || {
                    let _ = serve(client, &upstream, fail, &count, &seen);
                });
            }
        });
        FlakyProxy { addr, requests }
    }

    /// The request lines so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    mut client: TcpStream,
    upstream: &str,
    fail: usize,
    count: &AtomicUsize,
    seen: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 << 10 {
        if client.read(&mut byte)? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
        if head.len() == 1 && byte[0] == 0x16 {
            // A TLS hello: answer in plain HTTP so the engine falls back to http://.
            client.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n")?;
            return Ok(());
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let line = text.lines().next().unwrap_or_default().to_owned();
    if count.fetch_add(1, Ordering::SeqCst) < fail {
        seen.lock().unwrap().push(format!("503 {line}"));
        client.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    seen.lock().unwrap().push(format!("fwd {line}"));
    // One request per connection, so every request passes through here.
    let mut rewritten: String = text
        .trim_end()
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .map(|l| format!("{l}\r\n"))
        .collect();
    rewritten.push_str("Connection: close\r\n\r\n");
    let mut server = TcpStream::connect(upstream)?;
    server.write_all(rewritten.as_bytes())?;
    std::io::copy(&mut server, &mut client)?;
    Ok(())
}

/// A file under a directory, for task fixtures.
pub fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
}
