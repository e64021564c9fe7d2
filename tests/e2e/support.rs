//! Shared helpers of the end-to-end tests.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use testkit::upstream::{OPENAI_KEY, ScriptedUpstream};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runner package's dir has a parent")
        .to_path_buf()
}

/// The `runner` binary under test. The e2e tests are an integration-test target of the
/// `runner` package, so Cargo builds the binary with the tests, with the same features: no
/// second build of its dependency tree under another feature set.
pub fn runner_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_runner"))
}

/// A `runner` command for the binary under test.
pub fn runner() -> assert_cmd::Command {
    assert_cmd::Command::new(runner_bin())
}

/// `runner run` of `tasks/examples/hello-file` with the agent config `config`, jobs in
/// `jobs`; the caller adds flags and env and runs it.
pub fn run_hello_file(jobs: &Path, config: &Path) -> assert_cmd::Command {
    let mut command = runner();
    command
        .args(["run", "--jobs-dir"])
        .arg(jobs)
        .arg("--path")
        .arg(workspace_root().join("tasks/examples/hello-file"))
        .arg("-a")
        .arg(config);
    command
}

/// [`run_hello_file`] with the OpenAI key and base URL of `upstream` and the flags `extra`
/// (after the base image is made): asserts that the run exits 0 and returns its job.
pub fn run_hello_file_on(
    jobs: &Path,
    config: &Path,
    upstream: &ScriptedUpstream,
    extra: &[&str],
) -> Job {
    ensure_base_image();
    let output = run_hello_file(jobs, config)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("OPENAI_BASE_URL", upstream.openai_base_url())
        .args(extra)
        .timeout(Duration::from_secs(1200))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    Job::single_in(jobs)
}

/// Commands that look for each of `keys` (upstream keys) in every process's environment (the
/// container's own env included, as PID 1's) and in the files of the container, writing what
/// they find to /logs/agent/key-scan.txt (collected into the trial dir), then
/// [`SCAN_COMPLETE`]. Each key is split in two, so the scan command itself never holds it
/// whole; the read-only prepared agent files (`/opt/runner-agent`) are not searched.
pub fn key_scan(keys: &[&str]) -> String {
    let mut assign = String::new();
    let mut patterns = String::new();
    for (i, key) in keys.iter().enumerate() {
        // Split after a dozen characters: neither half is then shaped like a provider key
        // (a prefix such as `sk-proj-` with too few characters after it, and a rest with no
        // prefix), so the command the agent logs trips no key rule.
        let (a, b) = key.split_at(key.len().min(12));
        assign.push_str(&format!("a{i}='{a}'; b{i}='{b}'; "));
        patterns.push_str(&format!(" -e \"$a{i}$b{i}\""));
    }
    format!(
        "{assign}: > /logs/agent/key-scan.txt; \
         for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\" 2>/dev/null | grep -qF{patterns} && echo \"$f\" >> /logs/agent/key-scan.txt; done; \
         grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=runner-agent{patterns} / >> /logs/agent/key-scan.txt; \
         echo {SCAN_COMPLETE} >> /logs/agent/key-scan.txt"
    )
}

/// The last line of a [`key_scan`] that ran to its end.
pub const SCAN_COMPLETE: &str = "key-scan-complete";

/// Asserts that `scan` (a [`key_scan`]'s file) ran to its end and found nothing.
pub fn assert_scan_clean(scan: &str, what: &str) {
    assert_eq!(
        scan.trim(),
        SCAN_COMPLETE,
        "{what}: the key scan found the key (or did not finish): {scan}"
    );
}

/// Python for a command agent's script (it holds no braces, which are placeholders in a
/// command): its imports and `ask(model, text)`, one chat completion through the OpenAI
/// endpoint the runner gives the agent, answering the HTTP status (a refusal's too) or, when
/// no answer came, the error.
pub const PY_ASK: &str = r#"import json, os, urllib.error, urllib.request
def ask(model, text):
    body = json.dumps(dict(model=model, messages=[dict(role="user", content=text)])).encode()
    headers = dict(Authorization="Bearer " + os.environ["OPENAI_API_KEY"])
    headers["Content-Type"] = "application/json"
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return repr(e)
"#;

/// An agent config (for [`write_agent_config`]) of the command agent `name`, version 0.1,
/// that declares `models` and runs `command` (which may hold no braces: they are
/// placeholders in commands).
pub fn command_agent(name: &str, models: &[&str], command: &str) -> String {
    format!(
        "name = {name:?}\nversion = \"0.1\"\nmodels = {models:?}\n[run]\ncommand = '''\n{command}'''\n"
    )
}

/// [`command_agent`] whose command runs the Python `script` after [`PY_ASK`], then solves
/// hello-file.
pub fn chat_agent(name: &str, models: &[&str], script: &str) -> String {
    let command =
        format!("python3 - <<'PY'\n{PY_ASK}{script}PY\necho 'Hello, world!' > /app/hello.txt\n");
    command_agent(name, models, &command)
}

/// Makes sure the examples' base image exists (the project's own offline script).
pub fn ensure_base_image() {
    static BASE: Once = Once::new();
    BASE.call_once(|| {
        let status = Command::new("bash")
            .arg(workspace_root().join("scripts/base-image.sh"))
            .status()
            .expect("bash runs");
        assert!(
            status.success(),
            "scripts/base-image.sh failed: the Docker engine and debootstrap are needed"
        );
    });
}

/// Ids of containers (running or not) carrying `label`.
pub fn containers_with_label(label: &str) -> Vec<String> {
    containers_with_label_on(None, label)
}

/// Ids of containers (running or not) carrying `label` on the engine at `host` (`-H`; the
/// default engine when `None`).
pub fn containers_with_label_on(host: Option<&str>, label: &str) -> Vec<String> {
    let mut command = Command::new("docker");
    if let Some(host) = host {
        command.args(["-H", host]);
    }
    let out = command
        .args(["ps", "-aq", "--filter", &format!("label={label}")])
        .output()
        .expect("the docker CLI runs");
    assert!(
        out.status.success(),
        "docker ps failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `runner view JOB_DIR --out` a new temp dir, which is returned (the report's pages).
pub fn view_report(job_dir: &Path) -> tempfile::TempDir {
    let report = tempfile::tempdir().unwrap();
    runner()
        .arg("view")
        .arg(job_dir)
        .arg("--out")
        .arg(report.path())
        .assert()
        .code(0);
    report
}

/// Writes an agent config (`--agent-config`) as `agent.toml` in `dir` and returns its path.
pub fn write_agent_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("agent.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The one eval of a job's `result.json` (`stats.evals`), for a job of one agent and model.
pub fn only_eval(result: &serde_json::Value) -> &serde_json::Value {
    let evals = result["stats"]["evals"].as_object().expect("stats.evals");
    assert_eq!(evals.len(), 1, "one eval: {evals:?}");
    evals.values().next().unwrap()
}

/// `output`'s stdout and stderr as text, after asserting that it exited with `code` (both
/// streams are shown when it did not).
pub fn exited(output: &Output, code: i32) -> (String, String) {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// Starts `runner run --agent oracle <args…> --jobs-dir <jobs> --path <task>` in the background
/// (output discarded) and returns once the job has recorded its id and `up` holds for the
/// job's container label `runner.job=<id>` and a trial's log says its agent phase began:
/// the child, which the caller waits on, and the job id. `never` is the failure message when
/// five minutes pass first.
// The caller waits on the child; only a failed assertion here leaves it to the test's end.
#[allow(clippy::zombie_processes)]
pub fn start_job_until(
    args: &[&str],
    jobs: &Path,
    task: &Path,
    never: &str,
    up: impl Fn(&str) -> bool,
) -> (Child, String) {
    ensure_base_image();
    let child = Command::new(runner_bin())
        .args(["run", "--agent", "oracle"])
        .args(args)
        .arg("--jobs-dir")
        .arg(jobs)
        .arg("--path")
        .arg(task)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner starts");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(Instant::now() < deadline, "{never}");
        if let Ok(entries) = std::fs::read_dir(jobs)
            && let Some(job) = entries.flatten().next()
            && let Ok(text) = std::fs::read_to_string(job.path().join("result.json"))
        {
            let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if let Some(id) = value["id"].as_str()
                && up(&format!("runner.job={id}"))
                && agent_running(&job.path())
            {
                return (child, id.to_owned());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether a trial of the job in `job_dir` has begun its agent phase (its trial.log says so):
/// an event to wait for, where a fixed sleep would race a loaded machine.
fn agent_running(job_dir: &Path) -> bool {
    std::fs::read_dir(job_dir).is_ok_and(|entries| {
        entries.flatten().any(|trial| {
            std::fs::read_to_string(trial.path().join("trial.log"))
                .is_ok_and(|log| log.contains("phase: running agent started"))
        })
    })
}

/// Runs `git args…` in `repo` as a fixed test identity (no signing) and returns its trimmed
/// stdout; a failure fails the test with git's stderr.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A finished job directory.
pub struct Job {
    /// The job directory.
    pub dir: PathBuf,
}

impl Job {
    /// The only job directory under `jobs_dir`.
    pub fn single_in(jobs_dir: &Path) -> Job {
        let dirs: Vec<PathBuf> = std::fs::read_dir(jobs_dir)
            .expect("jobs dir exists")
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(
            dirs.len(),
            1,
            "expected one job dir in {}",
            jobs_dir.display()
        );
        Job {
            dir: dirs[0].clone(),
        }
    }

    /// Parsed JSON of a file in the job dir.
    pub fn json(&self, rel: &str) -> serde_json::Value {
        let path = self.dir.join(rel);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The text of `rel` in the trial directory `trial`.
    pub fn trial_file(&self, trial: &str, rel: &str) -> String {
        let path = self.dir.join(trial).join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Asserts that `<trial>/<rel>` holds exactly `text`, for each `(rel, text)` of `files`.
    pub fn assert_trial_files(&self, trial: &str, files: &[(&str, &str)]) {
        for (rel, text) in files {
            assert_eq!(self.trial_file(trial, rel), *text, "{trial}/{rel}");
        }
    }

    /// The rows of the trial's `artifacts/manifest.json`, as
    /// [`testkit::records::artifact_manifest`] reads them.
    pub fn artifact_manifest(&self, trial: &str) -> Vec<[String; 4]> {
        testkit::records::artifact_manifest(&self.dir.join(trial).join("artifacts"))
    }

    /// Every trial's result.json, by trial dir name.
    pub fn trial_results(&self) -> Vec<(String, serde_json::Value)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                out.push((name.clone(), self.json(&format!("{name}/result.json"))));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The job id from config files.
    pub fn job_id(&self) -> String {
        self.json("result.json")["id"]
            .as_str()
            .expect("job id")
            .to_owned()
    }
}

/// A trial result's main reward.
pub fn reward(result: &serde_json::Value) -> Option<f64> {
    result["verifier_result"]["rewards"]["reward"].as_f64()
}

/// A trial result's exception type.
pub fn exception(result: &serde_json::Value) -> Option<String> {
    result["exception_info"]["exception_type"]
        .as_str()
        .map(str::to_owned)
}

/// How a measured child ended.
pub struct Measured {
    /// The exit code; `None` when it was killed at the deadline or by a signal.
    pub code: Option<i32>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// Peak resident set size in MiB.
    pub peak_rss_mib: f64,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Runs the runner binary with `args`, killing it after `deadline`, and measures its peak RSS
/// as the largest `VmHWM` of its `/proc/<pid>/status`, read every 5 ms while it runs. Not
/// `ru_maxrss`: Linux carries the high-water mark of the mm a process had before `exec` into
/// it, and a child spawned from this test process (vfork, or fork) starts from the test
/// process's own RSS, which other tests running in it inflate. `VmHWM` belongs to the mm that
/// `exec` made, so it is the runner's alone; it is monotonic, so only growth in the last 5 ms
/// before exit could go unseen.
// The child is reaped by wait4, which std's `Child` does not know about.
#[allow(clippy::zombie_processes)]
pub fn measured(args: &[OsString], deadline: Duration) -> Measured {
    let program = runner().get_program().to_owned();
    let logs = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (logs.path().join("out"), logs.path().join("err"));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("the runner binary starts");
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let mut status = 0;
    // SAFETY: rusage is plain data; zero is a valid value of every field.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut killed = false;
    let mut peak_kib = 0u64;
    loop {
        peak_kib = peak_kib.max(high_water_kib(pid).unwrap_or(0));
        // SAFETY: pid is our own unreaped child; status and usage are valid out-pointers.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(reaped >= 0, "wait4 failed");
        if reaped == pid {
            break;
        }
        if !killed && start.elapsed() > deadline {
            child.kill().unwrap();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed = start.elapsed();
    let code = (!killed && libc::WIFEXITED(status)).then(|| libc::WEXITSTATUS(status));
    assert!(peak_kib > 0, "no VmHWM was read while the runner ran");
    Measured {
        code,
        stdout: std::fs::read_to_string(out_path).unwrap(),
        stderr: std::fs::read_to_string(err_path).unwrap(),
        peak_rss_mib: peak_kib as f64 / 1024.0,
        elapsed,
    }
}

/// `VmHWM` of process `pid` in KiB (`None` once it has exited or before it has exec'd).
fn high_water_kib(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `tasks/examples`: the example tasks.
pub fn examples() -> PathBuf {
    workspace_root().join("tasks/examples")
}

/// A dataset of some of the examples, `tasks`, copied under `root` as `root/examples` with
/// the examples' dataset.toml: the same directory name (so the same source and eval key) and
/// the same task contents and digests, for a test whose promise needs fewer tasks than all.
pub fn examples_subset(root: &Path, tasks: &[&str]) -> PathBuf {
    let dataset = root.join("examples");
    std::fs::create_dir_all(&dataset).unwrap();
    std::fs::copy(
        examples().join("dataset.toml"),
        dataset.join("dataset.toml"),
    )
    .unwrap();
    for task in tasks {
        testkit::files::copy_dir(&examples().join(task), &dataset.join(task));
    }
    dataset
}

/// The JSON file at `path`; panics naming it when it cannot be read.
pub fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// Rewrites the JSON file at `path` with `edit` applied (a record forged or changed).
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value = json_file(path);
    edit(&mut value);
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

/// An HTTP server on loopback answering `<name>:<path>`, for the egress tests' hosts; the
/// paths it was asked for.
pub fn origin(name: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let path = text.split(' ').nth(1).unwrap_or_default().to_owned();
            record.lock().unwrap().push(path.clone());
            let body = format!("{name}:{path}");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

/// `runner run --agent oracle --max-retries 0` of `path`, jobs in `jobs`, with the egress
/// proxy resolving names as `resolve` pins them (`RUNNER_EGRESS_RESOLVE`:
/// `name:port=ip,…`): the egress tests' run, and its job.
pub fn run_oracle_resolving(jobs: &Path, path: &Path, resolve: &str) -> (Output, Job) {
    let output = runner()
        .args([
            "run",
            "--agent",
            "oracle",
            "--max-retries",
            "0",
            "--jobs-dir",
        ])
        .arg(jobs)
        .arg("--path")
        .arg(path)
        .env("RUNNER_EGRESS_RESOLVE", resolve)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    (output, Job::single_in(jobs))
}
