//! Remote engines in a pool, for real: a `tcp://` engine that demands TLS with client
//! certificates (engine 3 of `scripts/docker-engines.sh tls`, a dockerd with `--tlsverify` on
//! 127.0.0.1) and an `ssh://` engine (a throwaway `sshd` of this test on 127.0.0.1, its own
//! config, host key and client key, whose `docker` talks to extra engine 1). The examples score
//! on them as on the local engine; a Docker CLI context names the TLS engine with its own
//! certificates; a CA the engine's certificate does not chain to and a key sshd does not
//! accept are refused before the job, naming the engine and why.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::pool::{ENGINES, extra_engines};
use crate::support::{Job, ensure_base_image, runner_bin, workspace_root};

/// Engine 3 of scripts/docker-engines.sh, beyond the two the pool tests start.
const TLS_ENGINE: u32 = 3;
const TLS_PORT: u16 = 23763;

/// Starts (or finds running) the TLS engine; returns its URL and the client's
/// DOCKER_CERT_PATH directory the script made.
fn tls_engine() -> (String, PathBuf) {
    ensure_base_image();
    let status = Command::new("bash")
        .arg(workspace_root().join("scripts/docker-engines.sh"))
        .args(["tls", &TLS_ENGINE.to_string(), &TLS_PORT.to_string()])
        .status()
        .expect("bash runs");
    assert!(
        status.success(),
        "scripts/docker-engines.sh tls {TLS_ENGINE} {TLS_PORT} failed: the TLS engine test needs it (dockerd, openssl)"
    );
    (
        format!("tcp://127.0.0.1:{TLS_PORT}"),
        PathBuf::from(format!("/run/runner-engines/{TLS_ENGINE}/client")),
    )
}

/// A throwaway sshd on 127.0.0.1 (killed when dropped) and the client side: an ssh config
/// per key that trusts only this sshd's host key and never reads the user's own ~/.ssh.
struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    user: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    /// The engine URL of this sshd's `docker`.
    fn url(&self) -> String {
        format!("ssh://{}@127.0.0.1:{}", self.user, self.port)
    }

    /// `RUNNER_SSH_COMMAND` for logging in with `key` (`client` is authorised, `stranger`
    /// is not).
    fn ssh_command(&self, key: &str) -> String {
        format!(
            "ssh -F {}",
            self.dir.path().join(format!("{key}.config")).display()
        )
    }
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen runs (openssh-client)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts sshd with `DOCKER_HOST=docker_host` for its sessions and waits (bounded) until it
/// accepts connections.
fn sshd(docker_host: &str) -> Sshd {
    let sshd_bin = Path::new("/usr/sbin/sshd");
    assert!(
        sshd_bin.exists(),
        "no /usr/sbin/sshd: the ssh:// engine test needs openssh-server (.ci/run installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let at = |f: &str| dir.path().join(f);
    for key in ["host_key", "client", "stranger"] {
        keygen(&at(key));
    }
    std::fs::copy(at("client.pub"), at("authorized_keys")).unwrap();
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        at("sshd_config"),
        format!(
            "ListenAddress 127.0.0.1\nPort {port}\nHostKey {host}\nAuthorizedKeysFile {auth}\n\
             PidFile {pid}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\n\
             UsePAM no\nSetEnv DOCKER_HOST={docker_host}\n",
            host = at("host_key").display(),
            auth = at("authorized_keys").display(),
            pid = at("sshd.pid").display(),
        ),
    )
    .unwrap();
    let host_key = std::fs::read_to_string(at("host_key.pub")).unwrap();
    std::fs::write(at("known_hosts"), format!("[127.0.0.1]:{port} {host_key}")).unwrap();
    for key in ["client", "stranger"] {
        std::fs::write(
            at(&format!("{key}.config")),
            format!(
                "Host *\n  IdentityFile {key_path}\n  IdentitiesOnly yes\n  IdentityAgent none\n\
                 \x20 UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n\
                 \x20 StrictHostKeyChecking yes\n  UpdateHostKeys no\n",
                key_path = at(key).display(),
                known = at("known_hosts").display(),
            ),
        )
        .unwrap();
    }
    // sshd's privilege separation directory, which only the distribution's service makes.
    std::fs::create_dir_all("/run/sshd").unwrap();
    let log = std::fs::File::create(at("sshd.log")).unwrap();
    let mut child = Command::new(sshd_bin)
        .args(["-D", "-e", "-f"])
        .arg(at("sshd_config"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("sshd starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = child.try_wait().unwrap();
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "sshd did not listen on 127.0.0.1:{port}: {}",
            std::fs::read_to_string(at("sshd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Sshd {
        child,
        dir,
        port,
        user,
    }
}

/// `runner run --agent oracle` of `tasks` in `jobs` with `args`, the engine env cleared
/// first so only what the test sets applies.
fn run(jobs: &Path, tasks: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(runner_bin());
    command
        .args(["run", "--agent", "oracle", "-n", "4", "--jobs-dir"])
        .arg(jobs)
        .arg("--path")
        .arg(tasks)
        .args(args);
    for var in [
        "RUNNER_DOCKER_HOSTS",
        "DOCKER_TLS_VERIFY",
        "DOCKER_CERT_PATH",
        "RUNNER_SSH_COMMAND",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied()).output().unwrap()
}

#[test]
fn the_examples_score_on_a_tls_engine_and_an_ssh_engine() {
    let _engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    let [one, _] = extra_engines();
    let (tls, client_certs) = tls_engine();
    let sshd = sshd(&one);
    let ssh = sshd.url();
    let ssh_name = format!("ssh://127.0.0.1:{}", sshd.port);
    let jobs = tempfile::tempdir().unwrap();
    let output = run(
        jobs.path(),
        &workspace_root().join("tasks/examples"),
        &["--docker-host", &tls, "--docker-host", &ssh],
        &[
            ("DOCKER_TLS_VERIFY", "1"),
            ("DOCKER_CERT_PATH", client_certs.to_str().unwrap()),
            ("RUNNER_SSH_COMMAND", &sshd.ssh_command("client")),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let job = Job::single_in(jobs.path());
    let results = job.trial_results();
    assert_eq!(results.len(), 10, "{stderr}");
    let used = crate::pool::examples_scored_as_on_one_engine(&results);
    for (trial, result) in &results {
        assert!(
            !result.to_string().contains(&format!("{}@", sshd.user)),
            "{trial}: records name the ssh engine without its user: {result}"
        );
    }
    assert_eq!(
        used,
        [tls.clone(), ssh_name.clone()].into_iter().collect(),
        "both remote engines took trials, named by host: {stderr}"
    );
    // The ssh engine's trials ran on the engine sshd's `docker` talks to: their images are there.
    let lock = job.json("lock.json");
    for (trial, result) in &results {
        if result["engine"] != ssh_name.as_str() {
            continue;
        }
        let task = result["task_name"].as_str().unwrap();
        let id = lock["engine_images"][task][&ssh_name].as_str().unwrap();
        let there = Command::new("docker")
            .args(["-H", &one, "image", "inspect", id])
            .output()
            .unwrap();
        assert!(
            there.status.success(),
            "{trial}: image {id} is not on {one}"
        );
    }
}

#[test]
fn a_docker_cli_context_gives_a_tls_engine_its_own_certificates() {
    let _engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    let [one, _] = extra_engines();
    let (tls, client_certs) = tls_engine();
    let config = tempfile::tempdir().unwrap();
    let file = |f: &str| client_certs.join(f).display().to_string();
    let created = Command::new("docker")
        .env("DOCKER_CONFIG", config.path())
        .args(["context", "create", "tls-engine", "--docker"])
        .arg(format!(
            "host={tls},ca={},cert={},key={}",
            file("ca.pem"),
            file("cert.pem"),
            file("key.pem")
        ))
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let jobs = tempfile::tempdir().unwrap();
    // No DOCKER_TLS_VERIFY: the context alone makes the engine a TLS one, mixed with a
    // unix:// engine given by URL.
    let output = run(
        jobs.path(),
        &workspace_root().join("tasks/examples/hello-file"),
        &[
            "--k",
            "4",
            "--docker-context",
            "tls-engine#n=2",
            "--docker-host",
            &one,
        ],
        &[("DOCKER_CONFIG", config.path().to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("engine {tls}: ")) && stderr.contains("at most 2 trial(s)"),
        "{stderr}"
    );
    let results = Job::single_in(jobs.path()).trial_results();
    assert_eq!(results.len(), 4, "{stderr}");
    for (trial, result) in &results {
        assert_eq!(
            crate::support::reward(result),
            Some(1.0),
            "{trial}: {result}"
        );
    }
    assert!(
        results.iter().any(|(_, r)| r["engine"] == tls.as_str()),
        "the context's engine took trials: {stderr}"
    );
}

#[test]
fn a_wrong_ca_and_a_key_sshd_refuses_are_refused_by_engine_before_the_job() {
    let _engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    let [one, _] = extra_engines();
    let (tls, _) = tls_engine();
    let sshd = sshd(&one);
    let ssh = sshd.url();
    let hello = workspace_root().join("tasks/examples/hello-file");
    let jobs = tempfile::tempdir().unwrap();
    let refused = |output: Output, says: &[&str]| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        for text in says {
            assert!(stderr.contains(text), "wanted {text:?} in: {stderr}");
        }
    };

    // Certificates of another CA: the engine's certificate does not chain to it.
    let other_ca = tempfile::tempdir().unwrap();
    let made = Command::new("bash")
        .arg(workspace_root().join("scripts/docker-engines.sh"))
        .arg("certs")
        .arg(other_ca.path())
        .status()
        .unwrap();
    assert!(made.success());
    refused(
        run(
            jobs.path(),
            &hello,
            &["--docker-host", &tls],
            &[
                ("DOCKER_TLS_VERIFY", "1"),
                ("DOCKER_CERT_PATH", other_ca.path().to_str().unwrap()),
            ],
        ),
        &[
            &format!("--docker-host {tls}"),
            "TLS handshake",
            "invalid peer certificate",
        ],
    );

    // A key sshd does not accept: ssh's own words, and no password prompt hangs the run.
    refused(
        run(
            jobs.path(),
            &hello,
            &["--docker-host", &ssh],
            &[("RUNNER_SSH_COMMAND", &sshd.ssh_command("stranger"))],
        ),
        &[
            // Named without its user-info (a user name may be a token).
            &format!(
                "--docker-host {}",
                ssh.replace(&format!("{}@", sshd.user), "")
            ),
            "ssh said",
            "Permission denied",
        ],
    );
    for job in std::fs::read_dir(jobs.path()).unwrap() {
        let job = job.unwrap().path();
        assert_eq!(
            std::fs::read_dir(&job).unwrap().count(),
            0,
            "no trial ran: {}",
            job.display()
        );
    }
}

#[test]
fn docker_host_naming_a_tls_engine_is_the_one_engine_of_a_run_without_a_pool() {
    let _engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    let (tls, client_certs) = tls_engine();
    let jobs = tempfile::tempdir().unwrap();
    // Spoken to in plain HTTP, this engine would refuse every call: scoring proves TLS.
    let output = run(
        jobs.path(),
        &workspace_root().join("tasks/examples/hello-file"),
        &[],
        &[
            ("DOCKER_HOST", &tls),
            ("DOCKER_TLS_VERIFY", "1"),
            ("DOCKER_CERT_PATH", client_certs.to_str().unwrap()),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let results = Job::single_in(jobs.path()).trial_results();
    assert_eq!(results.len(), 1, "{stderr}");
    assert_eq!(
        crate::support::reward(&results[0].1),
        Some(1.0),
        "{}",
        results[0].1
    );
}
