//! No credential echoed (issue 39, item 5): an engine URL with a password in it, given every
//! way a user can give one (`--docker-host`, `DOCKER_HOST`, `RUNNER_DOCKER_HOSTS`, a Docker
//! CLI context, `runner serve`'s `DOCKER_HOST`), is refused, and neither the refusal nor any
//! file the command left behind holds the password. Each engine URL points at a closed
//! loopback port, so nothing leaves this machine.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{runner_bin, workspace_root};

/// One way of giving an engine URL, and the password it carries.
struct Case {
    what: &'static str,
    password: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
}

fn cases(config: &Path) -> Vec<Case> {
    let url = |scheme: &str, password: &str| format!("{scheme}://user:{password}@127.0.0.1:1");
    let context = "leaky";
    write_context(config, context, &url("tcp", "Ctx6Passw0rdXyz"));
    vec![
        Case {
            what: "--docker-host ssh://",
            password: "Ssh1Passw0rdXyz",
            args: vec!["--docker-host".into(), url("ssh", "Ssh1Passw0rdXyz")],
            env: vec![],
        },
        Case {
            what: "--docker-host tcp://",
            password: "Tcp2Passw0rdXyz",
            args: vec!["--docker-host".into(), url("tcp", "Tcp2Passw0rdXyz")],
            env: vec![],
        },
        Case {
            what: "DOCKER_HOST=tcp://",
            password: "Env3Passw0rdXyz",
            args: vec![],
            env: vec![("DOCKER_HOST", url("tcp", "Env3Passw0rdXyz"))],
        },
        Case {
            what: "DOCKER_HOST=ssh://",
            password: "Env4Passw0rdXyz",
            args: vec![],
            env: vec![("DOCKER_HOST", url("ssh", "Env4Passw0rdXyz"))],
        },
        Case {
            what: "RUNNER_DOCKER_HOSTS",
            password: "Pool5Passw0rdXyz",
            args: vec![],
            env: vec![(
                "RUNNER_DOCKER_HOSTS",
                format!(
                    "unix:///var/run/docker.sock,{}",
                    url("tcp", "Pool5Passw0rdXyz")
                ),
            )],
        },
        Case {
            what: "--docker-context",
            password: "Ctx6Passw0rdXyz",
            args: vec!["--docker-context".into(), context.into()],
            env: vec![("DOCKER_CONFIG", config.display().to_string())],
        },
        // A token given as the ssh user name: dialed (and refused by the closed port), and
        // still never shown.
        Case {
            what: "--docker-host ssh://TOKEN@",
            password: "Tok7UserAsTokenXyz",
            args: vec![
                "--docker-host".into(),
                "ssh://Tok7UserAsTokenXyz@127.0.0.1:1".into(),
            ],
            env: vec![],
        },
    ]
}

/// A Docker CLI context named `name` whose engine is `host`, in the store under `config`.
fn write_context(config: &Path, name: &str, host: &str) {
    // The store names a context's directory by the SHA-256 of its name.
    let out = Command::new("sh")
        .args(["-c", "printf %s \"$1\" | sha256sum", "_", name])
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let dir = config.join("contexts/meta").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let meta = serde_json::json!({
        "Name": name,
        "Metadata": {},
        "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": false}},
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
}

fn runner_with(args: &[&str], case: &Case) -> Output {
    let mut command = Command::new(runner_bin());
    command.args(args).args(&case.args);
    for var in [
        "RUNNER_DOCKER_HOSTS",
        "DOCKER_TLS_VERIFY",
        "DOCKER_CERT_PATH",
        "RUNNER_SSH_COMMAND",
    ] {
        command.env_remove(var);
    }
    command.envs(case.env.iter().map(|(k, v)| (*k, v.as_str())));
    command.output().unwrap()
}

/// Every file under `dir`, as bytes, with its path.
fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, bytes));
        }
    }
    out
}

fn assert_no_password(case: &Case, output: &Output, jobs: &Path) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "{}: refused\nstdout:\n{stdout}\nstderr:\n{stderr}",
        case.what
    );
    // The refusal says something about the engine: the test would pass vacuously on a run
    // that failed before reading it.
    assert!(
        stderr.contains("127.0.0.1:1") || stderr.contains("leaky"),
        "{}: the refusal names the engine\n{stderr}",
        case.what
    );
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(
            !text.contains(case.password),
            "{}: the password is on {stream}:\n{text}",
            case.what
        );
    }
    for (path, bytes) in files_under(jobs) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(case.password),
            "{}: the password is in {}",
            case.what,
            path.display()
        );
    }
}

#[test]
fn a_password_in_an_engine_url_appears_in_no_output_or_file() {
    let config = tempfile::tempdir().unwrap();
    let hello = workspace_root().join("tasks/examples/hello-file");
    for case in cases(config.path()) {
        let jobs = tempfile::tempdir().unwrap();
        let output = runner_with(
            &[
                "run",
                "--agent",
                "oracle",
                "--jobs-dir",
                jobs.path().to_str().unwrap(),
                "--path",
                hello.to_str().unwrap(),
            ],
            &case,
        );
        assert_no_password(&case, &output, jobs.path());
    }
    // `runner serve` connects to DOCKER_HOST's engine the same way.
    let jobs = tempfile::tempdir().unwrap();
    let serve = Case {
        what: "runner serve with DOCKER_HOST=tcp://",
        password: "Serve8Passw0rdXyz",
        args: vec![],
        env: vec![(
            "DOCKER_HOST",
            "tcp://user:Serve8Passw0rdXyz@127.0.0.1:1".into(),
        )],
    };
    let output = runner_with(
        &[
            "serve",
            "--port",
            "0",
            "--jobs-dir",
            jobs.path().to_str().unwrap(),
            "--path",
            hello.to_str().unwrap(),
        ],
        &serve,
    );
    assert_no_password(&serve, &output, jobs.path());
}
