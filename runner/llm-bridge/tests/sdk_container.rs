//! End to end: the official `openai` and `anthropic` Python SDKs, pip-installed from the
//! package index into an image built FROM the project's offline base image, call the bridge
//! from a `--network none` container through the bind-mounted socket and the static relay,
//! streaming and not. The test checks the answers, that `calls.jsonl` meters exactly what the
//! scripted upstream reported, that an undeclared model is refused and the budget runs out,
//! and that the upstream keys appear nowhere: not in the container (env, files,
//! `/proc/*/environ`), not in the record dir, not in the container's or the bridge's logs.
//!
//! Needs a Docker engine; without one the test fails (it never skips).

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use llm_bridge::{Budget, CONTAINER_BRIDGE_DIR, TrialGrant};
use serde_json::Value;
use sha2::{Digest, Sha256};
use support::upstream::{self, ScriptedUpstream};
use support::{ANTHROPIC_KEY, OPENAI_KEY};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Runs a command to completion; panics with its output when it fails.
fn run(program: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn docker(args: &[&str]) -> String {
    run("docker", args)
}

/// The offline base image's alias tag, made by the project's script when missing.
fn base_image() -> String {
    let script = repo_root().join("scripts/base-image.sh");
    run("bash", &[script.to_str().unwrap()]);
    "runner-base:bookworm-py".to_owned()
}

/// pip settings of this machine, to pass into the image build: `pip config list` (files and
/// `PIP_*` environment), then the proxy variables. Nothing here is written into the code; a
/// machine whose pip reaches the index directly passes nothing.
fn host_pip_settings() -> Vec<(String, String)> {
    const PIP_KEYS: &[(&str, &str)] = &[
        ("index-url", "PIP_INDEX_URL"),
        ("extra-index-url", "PIP_EXTRA_INDEX_URL"),
        ("trusted-host", "PIP_TRUSTED_HOST"),
        ("proxy", "PIP_PROXY"),
        ("default-timeout", "PIP_DEFAULT_TIMEOUT"),
        ("timeout", "PIP_DEFAULT_TIMEOUT"),
        ("retries", "PIP_RETRIES"),
    ];
    let mut settings: Vec<(String, String)> = Vec::new();
    let listed = std::process::Command::new("python3")
        .args(["-m", "pip", "config", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for line in listed.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let name = key.rsplit('.').next().unwrap_or(key);
        let value = value.trim().trim_matches('\'').to_owned();
        if let Some((_, env)) = PIP_KEYS.iter().find(|(k, _)| *k == name) {
            settings.retain(|(n, _)| n != env);
            settings.push(((*env).to_owned(), value));
        }
    }
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
    ] {
        if let Ok(value) = std::env::var(name) {
            settings.push((name.to_owned(), value));
        }
    }
    settings
}

/// The SDK image: base image + python3-venv + the SDKs from the package index. The host's CA
/// bundle goes in under its own name, because installing packages re-runs
/// update-ca-certificates, which would drop the TLS-intercepting proxy's CA from the system
/// bundle. Tagged by a digest of everything that goes in, so it is built once per change.
fn sdk_image() -> String {
    let base = base_image();
    let settings = host_pip_settings();
    let bundle = std::fs::read("/etc/ssl/certs/ca-certificates.crt").expect("the host CA bundle");
    let args: String = settings
        .iter()
        .map(|(name, _)| format!("ARG {name}\n"))
        .collect();
    let dockerfile = format!(
        "FROM {base}\n\
         COPY host-ca-bundle.crt /usr/local/share/runner-host-ca-bundle.crt\n\
         ENV PIP_CERT=/usr/local/share/runner-host-ca-bundle.crt \\\n    \
             REQUESTS_CA_BUNDLE=/usr/local/share/runner-host-ca-bundle.crt \\\n    \
             SSL_CERT_FILE=/usr/local/share/runner-host-ca-bundle.crt \\\n    \
             PIP_DISABLE_PIP_VERSION_CHECK=1\n\
         {args}\
         RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null && rm -rf /var/lib/apt/lists/*\n\
         RUN python3 -m venv /opt/sdk && /opt/sdk/bin/pip install -q openai anthropic\n"
    );
    let mut digest = Sha256::new();
    digest.update(dockerfile.as_bytes());
    digest.update(&bundle);
    for (name, value) in &settings {
        digest.update(format!("{name}={value}\n").as_bytes());
    }
    let tag = format!(
        "runner-llm-bridge-sdk:{}",
        &hex::encode(digest.finalize())[..12]
    );
    let exists = std::process::Command::new("docker")
        .args(["image", "inspect", &tag])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    if !exists {
        let context = tempfile::tempdir().unwrap();
        std::fs::write(context.path().join("Dockerfile"), &dockerfile).unwrap();
        std::fs::write(context.path().join("host-ca-bundle.crt"), &bundle).unwrap();
        let mut command = std::process::Command::new("docker");
        // Host networking for the build only: pip reaches the index the way this machine
        // does, and no build traffic goes to a container-network address.
        command.env("DOCKER_BUILDKIT", "0").args([
            "build",
            "--network",
            "host",
            "--label",
            "runner.managed=1",
            "-t",
            &tag,
        ]);
        for (name, value) in &settings {
            command.arg("--build-arg").arg(format!("{name}={value}"));
        }
        let output = command.arg(context.path()).output().unwrap();
        assert!(
            output.status.success(),
            "building the SDK image failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    tag
}

/// `host:pid:start-ticks`, the runner's owner label, so the runner's reaper can remove a
/// container this test leaves if it dies.
fn owner_label() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let ticks = after_name.split_whitespace().nth(19).unwrap_or("0");
    format!(
        "runner.owner={}:{}:{ticks}",
        host.trim(),
        std::process::id()
    )
}

/// A running container, removed when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &self.0])
            .output();
    }
}

/// Finds any of `needles` in a stream without holding it whole.
fn stream_contains(reader: impl Read, needles: &[&str]) -> Vec<String> {
    let matcher = aho_corasick::AhoCorasick::new(needles).unwrap();
    let mut found: Vec<String> = matcher
        .stream_find_iter(reader)
        .map(|m| needles[m.unwrap().pattern().as_usize()].to_owned())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// A tracing writer that keeps everything the bridge logs, for the key scan.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, files);
        } else {
            files.push(path);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_call_the_bridge_from_a_no_network_container() {
    let logs = LogBuffer::default();
    let writer = logs.clone();
    // Global (the bridge logs from runtime worker threads), and bridging the `log` crate
    // too, so what reqwest logs is scanned as well.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .try_init()
        .expect("the first and only subscriber of this test binary");

    let image = tokio::task::spawn_blocking(sdk_image).await.unwrap();
    let upstream = ScriptedUpstream::start(OPENAI_KEY, ANTHROPIC_KEY).await;
    let dir = tempfile::tempdir().unwrap();
    let bridge = support::bridge_for(&upstream, dir.path());
    let trial_dir = dir.path().join("sdk-trial");
    let mut grant = TrialGrant::new(
        "sdk-trial",
        vec![
            "openai/gpt-scripted".into(),
            "anthropic/claude-scripted".into(),
        ],
        &trial_dir,
    );
    // Exactly the six metered calls of the script: 2 × (chat 28 + responses 21 + messages 24).
    let six_calls = 2
        * (upstream::CHAT_USAGE.total()
            + upstream::RESPONSES_USAGE.total()
            + upstream::MESSAGES_USAGE.total());
    grant.budget = Budget {
        max_tokens: Some(six_calls),
        max_cost_usd: None,
    };
    let trial = bridge.start_trial(grant).await.unwrap();
    let token = trial.token().to_owned();

    let mount = format!("{}:{CONTAINER_BRIDGE_DIR}:ro", trial.socket_dir().display());
    let mut run_args: Vec<String> = [
        "run",
        "-d",
        "--network",
        "none",
        "--label",
        "runner.managed=1",
        "--label",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    run_args.push(owner_label());
    run_args.extend(["-v".to_string(), mount]);
    for (name, value) in trial.agent_env() {
        run_args.extend(["-e".to_string(), format!("{name}={value}")]);
    }
    run_args.extend([image.clone(), "sleep".into(), "infinity".into()]);
    let args: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let container = Container(docker(&args).trim().to_owned());
    let id = container.0.clone();

    // No network but loopback, as a `no-network` task has.
    let interfaces = docker(&["exec", &id, "cat", "/proc/net/dev"]);
    let names: Vec<&str> = interfaces
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(
        names,
        ["lo"],
        "the container has a network besides loopback"
    );

    let serve: Vec<String> = trial.relay_serve_command();
    let mut exec = vec!["exec".to_string(), "-d".into(), id.clone()];
    exec.extend(serve);
    docker(&exec.iter().map(String::as_str).collect::<Vec<_>>());
    let mut wait = vec!["exec".to_string(), id.clone()];
    wait.extend(trial.relay_wait_command(10_000));
    docker(&wait.iter().map(String::as_str).collect::<Vec<_>>());

    let script =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_calls.py"))
            .unwrap();
    let mut child = tokio::process::Command::new("docker")
        .args(["exec", "-i", &id, "/opt/sdk/bin/python", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(child.stdin.as_mut().unwrap(), &script)
        .await
        .unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the SDK script failed:\n{stdout}\n{stderr}"
    );
    let results: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    eprintln!("SDK versions in the container: {}", results["versions"]);

    // The answers, and the usage each SDK parsed, are the script's.
    for call in [
        "chat",
        "chat_stream",
        "responses",
        "responses_stream",
        "messages",
        "messages_stream",
    ] {
        assert_eq!(
            results[call]["text"],
            upstream::REPLY,
            "{call}: {}",
            results[call]
        );
    }
    let (chat, responses, messages) = (
        upstream::CHAT_USAGE,
        upstream::RESPONSES_USAGE,
        upstream::MESSAGES_USAGE,
    );
    // (call, JSON pointer into the usage the SDK parsed, expected count); each call is made
    // both whole and streamed.
    let expected_usage = [
        ("chat", "/prompt_tokens", chat.input),
        ("chat", "/completion_tokens", chat.output),
        ("chat", "/prompt_tokens_details/cached_tokens", chat.cached),
        ("responses", "/input_tokens", responses.input),
        ("responses", "/output_tokens", responses.output),
        ("messages", "/cache_read_input_tokens", messages.cached),
        ("messages", "/output_tokens", messages.output),
    ];
    for (format, pointer, expected) in expected_usage {
        for call in [format.to_owned(), format!("{format}_stream")] {
            let usage = &results[&call]["usage"];
            assert_eq!(
                usage.pointer(pointer),
                Some(&serde_json::json!(expected)),
                "{call}: {usage}"
            );
        }
    }
    assert_eq!(results["models"], serde_json::json!(["gpt-scripted"]));
    assert_eq!(results["undeclared"]["status"], 403);
    assert_eq!(
        results["undeclared"]["message"],
        "model 'gpt-not-declared' is not allowed in this trial; allowed models: openai/gpt-scripted, anthropic/claude-scripted"
    );
    let budget_reason = format!(
        "the trial 'sdk-trial' token budget is spent: {six_calls} of {six_calls} tokens used"
    );
    assert_eq!(results["over_budget_openai"]["status"], 429);
    assert_eq!(
        results["over_budget_openai"]["message"],
        budget_reason.as_str()
    );
    assert_eq!(results["over_budget_anthropic"]["status"], 402);
    assert!(
        results["over_budget_anthropic"]["message"]
            .as_str()
            .unwrap()
            .contains(&budget_reason)
    );

    // The upstream keys appear nowhere in the container. The token does (it is the agent's
    // key), which shows the scan looks where a key would be.
    let needles = [OPENAI_KEY, ANTHROPIC_KEY, token.as_str()];
    let inspect = docker(&["inspect", &id]);
    let proc_dump = docker(&[
        "exec",
        &id,
        "sh",
        "-c",
        "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; env",
    ]);
    assert_eq!(
        stream_contains(proc_dump.as_bytes(), &needles),
        vec![token.clone()],
        "process environments"
    );
    assert_eq!(
        stream_contains(inspect.as_bytes(), &needles),
        vec![token.clone()],
        "container config"
    );
    let container_logs = docker(&["logs", &id]);
    assert!(
        stream_contains(container_logs.as_bytes(), &needles).is_empty(),
        "container logs"
    );
    let export_id = id.clone();
    let in_files = tokio::task::spawn_blocking(move || {
        let mut export = std::process::Command::new("docker")
            .args(["export", &export_id])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let found = stream_contains(export.stdout.take().unwrap(), &[OPENAI_KEY, ANTHROPIC_KEY]);
        assert!(export.wait().unwrap().success(), "docker export failed");
        found
    })
    .await
    .unwrap();
    assert!(
        in_files.is_empty(),
        "the container's files hold {in_files:?}"
    );
    drop(container);

    let usage = trial.close().await.unwrap();
    let sum = |i: usize| {
        2 * [
            upstream::CHAT_USAGE,
            upstream::RESPONSES_USAGE,
            upstream::MESSAGES_USAGE,
        ]
        .iter()
        .map(|u| [u.input, u.cached, u.cache_write, u.output][i])
        .sum::<u64>()
    };
    assert_eq!(
        (
            usage.n_input_tokens,
            usage.n_cache_tokens,
            usage.n_cache_write_tokens,
            usage.n_output_tokens
        ),
        (sum(0), sum(1), sum(2), sum(3))
    );
    assert_eq!(
        (usage.n_calls, usage.n_refused_calls, usage.n_failed_calls),
        (6, 3, 0)
    );
    assert_eq!(
        usage.budget_exhausted.as_deref(),
        Some(budget_reason.as_str())
    );

    let text = std::fs::read_to_string(trial_dir.join("llm/calls.jsonl")).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let metered: Vec<&Value> = records.iter().filter(|r| r["outcome"] == "ok").collect();
    assert_eq!(metered.len(), 6);
    let recorded_input: u64 = metered
        .iter()
        .map(|r| r["usage"]["n_input_tokens"].as_u64().unwrap())
        .sum();
    let recorded_output: u64 = metered
        .iter()
        .map(|r| r["usage"]["n_output_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!((recorded_input, recorded_output), (sum(0), sum(3)));
    assert_eq!(metered.iter().filter(|r| r["stream"] == true).count(), 3);
    let refusals: Vec<&str> = records
        .iter()
        .filter_map(|r| r["refusal"].as_str())
        .collect();
    assert_eq!(
        refusals,
        ["model_not_allowed", "budget_exhausted", "budget_exhausted"]
    );

    // Nor in the record dir, nor in anything the bridge logged.
    let mut files = Vec::new();
    walk(&trial_dir, &mut files);
    assert!(
        files.len() >= 13,
        "calls.jsonl, usage.json and the bodies: {files:?}"
    );
    for file in files {
        let found = stream_contains(std::fs::File::open(&file).unwrap(), &needles);
        assert!(found.is_empty(), "{} holds a secret", file.display());
    }
    let logged = logs.0.lock().unwrap().clone();
    assert!(
        !logged.is_empty(),
        "the log capture caught nothing, so it proves nothing"
    );
    assert!(
        stream_contains(logged.as_slice(), &[OPENAI_KEY, ANTHROPIC_KEY]).is_empty(),
        "the bridge's logs"
    );
}

#[test]
fn the_relay_runs_on_an_image_with_nothing_else_in_it() {
    let context = tempfile::tempdir().unwrap();
    llm_bridge::relay::write_relay(&context.path().join("bridge-relay")).unwrap();
    std::fs::write(
        context.path().join("Dockerfile"),
        "FROM scratch\nCOPY bridge-relay /bridge-relay\nENTRYPOINT [\"/bridge-relay\"]\n",
    )
    .unwrap();
    let mut digest = Sha256::new();
    digest.update(llm_bridge::RELAY_BINARY);
    let tag = format!(
        "runner-llm-bridge-relay-scratch:{}",
        &hex::encode(digest.finalize())[..12]
    );
    let built = std::process::Command::new("docker")
        .env("DOCKER_BUILDKIT", "0")
        .args(["build", "-q", "--label", "runner.managed=1", "-t", &tag])
        .arg(context.path())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let version = docker(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--label",
        "runner.managed=1",
        &tag,
        "--version",
    ]);
    assert_eq!(
        version.trim(),
        format!("bridge-relay {}", env!("CARGO_PKG_VERSION"))
    );
}
