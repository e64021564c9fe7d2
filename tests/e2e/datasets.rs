//! Datasets by name (`runner run -d NAME@VERSION`): a registry.json served over HTTP on
//! loopback (python3's http.server), a task repository served by `git daemon` on loopback,
//! both made here from `tasks/examples` tasks; the cache under a temporary RUNNER_CACHE_DIR.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::free_port;

use crate::support::{Job, ensure_base_image, exited, git, reward, runner, workspace_root};

/// A process serving on a loopback port; stopped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn wait_ready(self) -> Server {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "server on {} never answered",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self
    }
}

impl Server {
    /// Stops the server and waits until its port refuses connections.
    fn stop(mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "server on {} still answers",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server's process group (its own, see [`git_daemon`]; for python3 the
    /// server alone).
    fn kill(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `git daemon` serving the repositories under `base` (read-only, on 127.0.0.1).
fn git_daemon(base: &Path, port: u16) -> Server {
    let child = Command::new("git")
        .args([
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", base.display()))
        .arg(base)
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("git is installed");
    Server { child, port }.wait_ready()
}

/// python3's http.server serving `dir` on 127.0.0.1.
fn http_server(dir: &Path) -> Server {
    let port = free_port();
    let child = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1"])
        .arg(port.to_string())
        .arg("--directory")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 is installed");
    Server { child, port }.wait_ready()
}

/// A registry and its repository, made from `tasks/examples` tasks.
struct Fixture {
    tmp: tempfile::TempDir,
    git_port: u16,
    daemon: Option<Server>,
    http: Server,
    commit: String,
}

/// The example tasks the repository holds, by their path in it.
const TASKS: [(&str, &str); 2] = [
    ("hello-file", "tasks/hello-file"),
    ("nonroot-workdir", "tasks/nonroot-workdir"),
];

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("git").join("bench.git");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        for (name, path) in TASKS {
            copy(
                &workspace_root().join("tasks/examples").join(name),
                &repo.join(path),
            );
        }
        // Another dataset's data in the same repository: never checked out for ours.
        std::fs::create_dir_all(repo.join("other")).unwrap();
        std::fs::write(repo.join("other/big.bin"), vec![7u8; 1 << 20]).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "tasks"]);
        // What public git hosts allow: a fetch by commit id, and blob filters.
        git(
            &repo,
            &["config", "uploadpack.allowReachableSHA1InWant", "true"],
        );
        git(&repo, &["config", "uploadpack.allowFilter", "true"]);
        let commit = git(&repo, &["rev-parse", "HEAD"]);
        let git_port = free_port();
        let daemon = git_daemon(&tmp.path().join("git"), git_port);
        let www = tmp.path().join("www");
        std::fs::create_dir_all(&www).unwrap();
        let http = http_server(&www);
        let fixture = Fixture {
            tmp,
            git_port,
            daemon: Some(daemon),
            http,
            commit,
        };
        fixture.write_registry(&fixture.commit.clone(), "tasks/hello-file");
        fixture
    }

    fn git_url(&self) -> String {
        format!("git://127.0.0.1:{}/bench.git", self.git_port)
    }

    fn registry_url(&self) -> String {
        format!("http://127.0.0.1:{}/registry.json", self.http.port)
    }

    fn cache(&self) -> PathBuf {
        self.tmp.path().join("cache")
    }

    /// registry.json: `tb` 1.0 (both tasks at `commit`, the first at `first_path`) and 0.9.
    fn write_registry(&self, commit: &str, first_path: &str) {
        let task = |name: &str, path: &str| serde_json::json!({"name": name, "git_url": self.git_url(), "git_commit_id": commit, "path": path});
        let registry = serde_json::json!([
            {"name": "tb", "version": "1.0", "description": "two example tasks",
             "tasks": [task("hello-file", first_path), task(TASKS[1].0, TASKS[1].1)]},
            {"name": "tb", "version": "0.9", "description": "one", "tasks": [task("hello-file", first_path)]},
        ]);
        std::fs::write(
            self.tmp.path().join("www/registry.json"),
            serde_json::to_vec_pretty(&registry).unwrap(),
        )
        .unwrap();
    }

    fn runner(&self, args: &[&str]) -> std::process::Output {
        runner()
            .env("RUNNER_CACHE_DIR", self.cache())
            .args(args)
            .timeout(Duration::from_secs(900))
            .output()
            .unwrap()
    }

    /// `runner run -d tb@1.0 -a oracle` with `extra`, jobs under the fixture.
    fn run(&self, job_name: &str, extra: &[&str]) -> std::process::Output {
        let jobs = self.tmp.path().join("jobs");
        let registry = self.registry_url();
        let mut args = vec![
            "run",
            "-d",
            "tb@1.0",
            "--registry-url",
            &registry,
            "-a",
            "oracle",
            "--job-name",
            job_name,
            "--jobs-dir",
        ];
        let jobs = jobs.to_str().unwrap().to_owned();
        args.push(&jobs);
        args.extend_from_slice(extra);
        self.runner(&args)
    }

    /// The cached copy of hello-file's test script.
    fn cached_test_script(&self) -> PathBuf {
        let mut found = Vec::new();
        find(&self.cache().join("datasets"), "test.sh", &mut found);
        found
            .into_iter()
            .find(|p| p.to_string_lossy().contains("hello-file"))
            .expect("hello-file is cached")
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn find(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            find(&path, name, out);
        } else if entry.file_name() == name {
            out.push(path);
        }
    }
}

#[test]
fn a_dataset_by_name_runs_fetched_then_offline_and_an_edited_cache_is_refused_then_refetched() {
    ensure_base_image();
    let mut fx = Fixture::new();

    // First run: fetched from the git server, one fetch for the repository.
    let out = fx.run("first", &["-i", "hello-file"]);
    let (_, stderr) = exited(&out, 0);
    assert_eq!(
        stderr.matches("fetching 2 task(s) from git://").count(),
        1,
        "{stderr}"
    );
    let job = Job {
        dir: fx.tmp.path().join("jobs/first"),
    };
    let results = job.trial_results();
    assert_eq!(results.len(), 1);
    assert_eq!(reward(&results[0].1), Some(1.0), "{:?}", results[0].1);
    let config = job.json("config.json");
    let dataset = &config["datasets"][0];
    assert_eq!(dataset["name"], "tb");
    assert_eq!(dataset["version"], "1.0");
    assert_eq!(dataset["registry_url"], fx.registry_url().as_str());
    assert_eq!(dataset["path"], Value::Null);
    assert_eq!(dataset["task_names"][0], "hello-file");
    let lock = job.json("lock.json");
    let task = &lock["trials"][0]["task"];
    assert_eq!(task["type"], "git");
    assert_eq!(task["git_url"], fx.git_url().as_str());
    assert_eq!(task["git_commit_id"], fx.commit.as_str());
    assert_eq!(task["path"], "tasks/hello-file");
    assert_eq!(task["registry"], fx.registry_url().as_str());
    assert!(
        task["digest"].as_str().unwrap().starts_with("sha256:"),
        "{task}"
    );
    // Only the dataset's paths were checked out: the repository's other data never came.
    let mut big = Vec::new();
    find(&fx.cache(), "big.bin", &mut big);
    assert!(big.is_empty(), "{big:?}");

    // Second run with the git server stopped: the verified cache serves it.
    fx.daemon.take().expect("the daemon runs").stop();
    let out = fx.run("offline", &["-i", "hello-file"]);
    let (_, stderr) = exited(&out, 0);
    assert!(!stderr.contains("fetching"), "{stderr}");
    let offline = Job {
        dir: fx.tmp.path().join("jobs/offline"),
    };
    assert_eq!(reward(&offline.trial_results()[0].1), Some(1.0));

    // validate-submission takes the dataset by name too, from the cache with git still down:
    // the job ran one of its two tasks, and the missing one is named.
    let registry = fx.registry_url();
    let first = fx.tmp.path().join("jobs/first");
    let out = fx.runner(&[
        "validate-submission",
        first.to_str().unwrap(),
        "--dataset",
        "tb@1.0",
        "--registry-url",
        &registry,
        "--min-trials",
        "1",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("nonroot-workdir"), "{text}");

    // A hand-edited cached task is never run as the pinned one: refused by name while the
    // repository is unreachable (exit 2, no job)...
    let script = fx.cached_test_script();
    std::fs::write(&script, "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n").unwrap();
    let out = fx.run("edited", &["-i", "hello-file"]);
    let (_, stderr) = exited(&out, 2);
    assert!(
        stderr.contains("task hello-file") && stderr.contains("no longer matches"),
        "{stderr}"
    );
    assert!(!fx.tmp.path().join("jobs/edited").exists());

    // ...and fetched again once it is back: the refused copy was set aside, so the next run
    // fetches the task afresh...
    fx.daemon = Some(git_daemon(&fx.tmp.path().join("git"), fx.git_port));
    let out = fx.run("refetched", &["-i", "hello-file", "--dry-run"]);
    let (_, stderr) = exited(&out, 0);
    assert!(stderr.contains("fetching 1 task(s)"), "{stderr}");
    let original =
        std::fs::read_to_string(workspace_root().join("tasks/examples/hello-file/tests/test.sh"))
            .unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.cached_test_script()).unwrap(),
        original
    );
    // ...and a copy edited (here truncated) while the repository answers is fetched again.
    std::fs::write(fx.cached_test_script(), &original[..original.len() / 2]).unwrap();
    let out = fx.run("refetched-again", &["-i", "hello-file", "--dry-run"]);
    let (_, stderr) = exited(&out, 0);
    assert!(
        stderr.contains("task hello-file: the cached copy")
            && stderr.contains("changed since it was fetched"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.cached_test_script()).unwrap(),
        original
    );

    // The registry moves its pin to a new commit: resuming the first job is refused, naming
    // the task and both commits, rather than finishing it on other tasks.
    let repo = fx.tmp.path().join("git/bench.git");
    std::fs::write(repo.join("tasks/hello-file/NOTES.md"), "moved on\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "moved"]);
    let moved = git(&repo, &["rev-parse", "HEAD"]);
    fx.write_registry(&moved, "tasks/hello-file");
    let out = fx.runner(&["run", "--resume", first.to_str().unwrap()]);
    let (_, stderr) = exited(&out, 2);
    assert!(
        stderr.contains(&format!("at {}", fx.commit))
            && stderr.contains(&format!("now pins commit {moved}")),
        "{stderr}"
    );
}

#[test]
fn a_leaderboard_config_with_a_registry_dataset_plans_every_task_times_n_attempts() {
    ensure_base_image();
    let fx = Fixture::new();
    // A Harbor leaderboard config (configs/leaderboard/*.yaml) as written, Claude Code and
    // its model included, with only its registry pointed at the local one. A plan needs the
    // provider's key to be there (a run without it would be refused), never its value in a
    // container: the fake one here is never sent anywhere.
    let config = fx.tmp.path().join("leaderboard.yaml");
    std::fs::write(
        &config,
        format!(
            "job_name: claude-code__tb\njobs_dir: jobs\nn_attempts: 3\ntimeout_multiplier: 1.0\n\
             environment:\n  type: docker\n  force_build: false\n  delete: true\n\
             agents:\n  - name: claude-code\n    model_name: anthropic/claude-opus-4-5\n\
             datasets:\n  - registry:\n      name: harbor\n      url: {}\n    name: tb\n    version: \"1.0\"\n",
            fx.registry_url()
        ),
    )
    .unwrap();
    let out = runner()
        .env("RUNNER_CACHE_DIR", fx.cache())
        .env("ANTHROPIC_API_KEY", "sk-ant-e2e-plan-only-0000000000000000")
        .args([
            "run",
            "-c",
            config.to_str().unwrap(),
            "--dry-run",
            "--format",
            "json",
        ])
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    let (stdout, stderr) = exited(&out, 0);
    let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(plan["trials"], 6, "{stdout}");
    assert_eq!(plan["agent"], "claude-code", "{stdout}");
    assert_eq!(plan["model"], "anthropic/claude-opus-4-5", "{stdout}");
    let tasks: Vec<&str> = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks.len(), 2, "{stdout}");
    // A plan fetches nothing: the agent's wheel is prepared only when trials are to run.
    assert!(!fx.cache().join("agents").exists(), "{stderr}");
    assert!(stderr.contains("dataset tb@1.0: 2 task(s)"), "{stderr}");
}

#[test]
fn bad_datasets_registries_and_repositories_are_named_with_exit_2() {
    let mut fx = Fixture::new();
    let registry = fx.registry_url();
    let dry = |fx: &Fixture, name: &str| {
        fx.runner(&[
            "run",
            "-d",
            name,
            "--registry-url",
            &registry,
            "-a",
            "oracle",
            "--dry-run",
        ])
    };
    let (_, err) = exited(&dry(&fx, "tbx"), 2);
    assert!(
        err.contains("\"tbx\"") && err.contains("it has: tb"),
        "{err}"
    );
    let (_, err) = exited(&dry(&fx, "tb@3.0"), 2);
    assert!(err.contains("versions: 1.0, 0.9"), "{err}");
    let (_, err) = exited(&dry(&fx, "org/tb@1.0"), 2);
    assert!(
        err.contains("Harbor Hub") && err.contains("--registry-url"),
        "{err}"
    );

    // A path missing at the commit, then a commit missing in the repository.
    fx.write_registry(&fx.commit.clone(), "tasks/gone");
    let (_, err) = exited(&dry(&fx, "tb@0.9"), 2);
    assert!(
        err.contains("task hello-file") && err.contains("\"tasks/gone\""),
        "{err}"
    );
    let absent = "0123456789abcdef0123456789abcdef01234567";
    fx.write_registry(absent, "tasks/hello-file");
    let (_, err) = exited(&dry(&fx, "tb@0.9"), 2);
    assert!(err.contains(&format!("has no commit {absent}")), "{err}");

    // The repository unreachable: named with the commit, nothing half-written in the cache.
    fx.write_registry(&fx.commit.clone(), "tasks/hello-file");
    fx.daemon.take().expect("the daemon runs").stop();
    let (_, err) = exited(&dry(&fx, "tb@0.9"), 2);
    assert!(
        err.contains(&format!(
            "cannot fetch {} at commit {}",
            fx.git_url(),
            fx.commit
        )),
        "{err}"
    );
    let mut staged = Vec::new();
    find(&fx.cache().join("datasets/.tmp"), "task.toml", &mut staged);
    assert!(staged.is_empty(), "{staged:?}");

    // A malformed registry names its file and field.
    let file = fx.tmp.path().join("bad.json");
    std::fs::write(&file, r#"[{"name": "tb", "version": 1, "tasks": []}]"#).unwrap();
    let out = fx.runner(&[
        "run",
        "-d",
        "tb",
        "--registry-path",
        file.to_str().unwrap(),
        "-a",
        "oracle",
    ]);
    let (_, err) = exited(&out, 2);
    assert!(
        err.contains("bad.json") && err.contains("[0].version"),
        "{err}"
    );
}

#[test]
fn datasets_list_and_download() {
    let fx = Fixture::new();
    let registry = fx.registry_url();
    let (out, _) = exited(
        &fx.runner(&["datasets", "list", "--registry-url", &registry]),
        0,
    );
    assert!(out.contains("tb") && out.contains("1.0, 0.9"), "{out}");
    let (out, _) = exited(
        &fx.runner(&[
            "datasets",
            "list",
            "--registry-url",
            &registry,
            "--format",
            "json",
        ]),
        0,
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["datasets"][0]["task_count"], 2, "{doc}");

    let dir = fx.tmp.path().join("downloaded");
    exited(
        &fx.runner(&[
            "datasets",
            "download",
            "tb",
            "--registry-url",
            &registry,
            "-o",
            dir.to_str().unwrap(),
        ]),
        0,
    );
    for (name, _) in TASKS {
        let task = dir.join(name);
        assert!(
            task.join("task.toml").is_file() && !task.is_symlink(),
            "{}",
            task.display()
        );
    }
    let (_, err) = exited(
        &fx.runner(&[
            "datasets",
            "download",
            "tb",
            "--registry-url",
            &registry,
            "-o",
            dir.to_str().unwrap(),
        ]),
        2,
    );
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn tasks_digest_and_check_take_a_dataset_by_name() {
    let fx = Fixture::new();
    let registry = fx.registry_url();
    let by_name = |command: &str, extra: &[&str]| {
        let mut args = vec![
            "tasks",
            command,
            "-d",
            "tb@1.0",
            "--registry-url",
            &registry,
        ];
        args.extend_from_slice(extra);
        fx.runner(&args)
    };
    let (out, _) = exited(&by_name("digest", &["--format", "json"]), 0);
    let named: Value = serde_json::from_str(&out).unwrap();
    // The same digests as the example tasks the registry's repository was made from.
    let examples = workspace_root().join("tasks/examples");
    for (i, (name, _)) in TASKS.iter().enumerate() {
        let (out, _) = exited(
            &fx.runner(&[
                "tasks",
                "digest",
                examples.join(name).to_str().unwrap(),
                "--format",
                "json",
            ]),
            0,
        );
        let own: Value = serde_json::from_str(&out).unwrap();
        let task = &named["tasks"][i];
        assert!(task["name"].as_str().unwrap().ends_with(name), "{named:#}");
        assert_eq!(task["digest"], own["tasks"][0]["digest"], "{named:#}");
    }

    let (out, _) = exited(
        &by_name("check", &["--checks", "loads", "--format", "json"]),
        0,
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["tasks"].as_array().unwrap().len(), 2, "{report:#}");

    // Neither a path nor -d: refused by clap; both: refused as conflicting.
    exited(&fx.runner(&["tasks", "digest"]), 2);
    let (_, err) = exited(&by_name("check", &[examples.to_str().unwrap()]), 2);
    assert!(err.contains("cannot be used with"), "{err}");
}
