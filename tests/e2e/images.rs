//! Task images against a real registry (Debian's `docker-registry` on loopback) and the real
//! engine: prebuilt `docker_image`s pulled once per job with the digest in lock.json, registry
//! auth from a Docker config (auths and a credential helper), retried 5xx answers, a missing
//! image as a typed error that leaves other tasks alone, Harbor's precedence with and without
//! `--force-build`, BuildKit build failures with their last lines, the disk watermark, and
//! `runner images pull` / `prune`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::registry::{
    FlakyProxy, Registry, image_present, login, push_marker_image, unique, write,
};
use crate::support::{Job, ensure_base_image, exception, exited, reward, runner};

/// Writes task `name` into `dataset`: a prebuilt `docker_image` and/or a Dockerfile (without
/// one, `environment/README.txt`, which Harbor uploads to the workdir `/app`), and a verifier
/// that copies `/marker` into the trial's verifier dir, notes whether the README arrived, and
/// scores 1.
fn task(dataset: &Path, name: &str, docker_image: Option<&str>, dockerfile: Option<&str>) {
    let dir = dataset.join(name);
    let image = docker_image
        .map(|i| format!("docker_image = \"{i}\"\n"))
        .unwrap_or_default();
    write(
        dir.join("task.toml"),
        &format!(
            "[task]\nname = \"images/{name}\"\n[agent]\ntimeout_sec = 60.0\n[verifier]\ntimeout_sec = 60.0\n\
             [environment]\nbuild_timeout_sec = 120.0\nworkdir = \"/app\"\n{image}"
        ),
    );
    write(dir.join("instruction.md"), "Nothing to do.\n");
    write(dir.join("solution/solve.sh"), "#!/bin/bash\ntrue\n");
    write(
        dir.join("tests/test.sh"),
        "#!/bin/bash\ncat /marker > /logs/verifier/marker.txt 2>/dev/null || echo none > /logs/verifier/marker.txt\n\
         if [ -f /app/README.txt ]; then echo yes; else echo no; fi > /logs/verifier/uploaded.txt\n\
         echo 1 > /logs/verifier/reward.txt\n",
    );
    match dockerfile {
        Some(text) => write(dir.join("environment/Dockerfile"), text),
        None => write(
            dir.join("environment/README.txt"),
            "uploaded to the workdir\n",
        ),
    }
}

/// A Dockerfile whose image says `marker` in `/marker`.
fn marker_dockerfile(marker: &str) -> String {
    format!("FROM runner-base:bookworm-py\nRUN echo {marker} > /marker\n")
}

struct Run {
    job: Job,
    code: i32,
    stderr: String,
    _jobs: tempfile::TempDir,
}

impl Run {
    /// Trials' results by task name.
    fn results(&self) -> Vec<(String, Value)> {
        self.job
            .trial_results()
            .into_iter()
            .map(|(_, result)| (result["task_name"].as_str().unwrap().to_owned(), result))
            .collect()
    }

    fn result_of(&self, task: &str) -> Value {
        self.results()
            .into_iter()
            .find(|(t, _)| t == task)
            .unwrap_or_else(|| panic!("no trial of {task}"))
            .1
    }

    /// The exception message of `task`'s trial, which must have ended in `exception_type`.
    fn failure_of(&self, task: &str, exception_type: &str) -> String {
        let result = self.result_of(task);
        assert_eq!(exception(&result).as_deref(), Some(exception_type));
        result["exception_info"]["exception_message"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// What the trial of `task` found in `/marker`.
    fn marker_of(&self, task: &str) -> String {
        self.verifier_file(task, "marker.txt")
    }

    /// The trimmed text of `name` in the verifier dir of `task`'s trial.
    fn verifier_file(&self, task: &str, name: &str) -> String {
        let trial = self.result_of(task)["trial_name"]
            .as_str()
            .unwrap()
            .to_owned();
        self.job
            .trial_file(&trial, &format!("verifier/{name}"))
            .trim()
            .to_owned()
    }

    fn trial_log_of(&self, task: &str) -> String {
        let trial = self.result_of(task)["trial_name"]
            .as_str()
            .unwrap()
            .to_owned();
        self.job.trial_file(&trial, "trial.log")
    }

    /// lock.json's image record of `task`.
    fn lock_image(&self, task: &str) -> Value {
        let lock = self.job.json("lock.json");
        lock["trials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task"]["name"] == task)
            .unwrap_or_else(|| panic!("no lock trial of {task}"))["task"]["image"]
            .clone()
    }
}

/// A low disk watermark for the tests that are not about it: CI machines share their disk
/// and have been seen with under 2 GB free, below the 4096 MB default, while the few small
/// images these tests make fit. Empty when `extra` sets its own.
fn low_watermark(extra: &[&str]) -> &'static [&'static str] {
    if extra.contains(&"--min-free-disk-mb") {
        &[]
    } else {
        &["--min-free-disk-mb", "256"]
    }
}

/// `runner run` with the oracle over `dataset`, `env` set, `extra` flags.
fn run(dataset: &Path, env: &[(&str, &Path)], extra: &[&str]) -> Run {
    ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let state = jobs.path().join("state");
    let mut command = runner();
    command
        .args([
            "run",
            "--agent",
            "oracle",
            "--n-concurrent",
            "4",
            "--jobs-dir",
        ])
        .arg(jobs.path().join("jobs"))
        .arg("--path")
        .arg(dataset)
        .args(extra)
        .args(low_watermark(extra))
        .env("RUNNER_STATE_DIR", &state)
        .timeout(Duration::from_secs(600));
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    eprintln!("{stderr}");
    // What this run pulled or built is in its own ledger: remove it, so tests leave no images
    // (and a later run of the same image pulls it again).
    let pruned = runner()
        .args(["images", "prune", "--older-than", "0"])
        .env("RUNNER_STATE_DIR", &state)
        .output()
        .unwrap();
    exited(&pruned, 0);
    Run {
        job: Job::single_in(&jobs.path().join("jobs")),
        code: output.status.code().unwrap_or(-1),
        stderr,
        _jobs: jobs,
    }
}

fn dataset_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("dataset");
    (dir, dataset)
}

#[test]
fn a_prebuilt_image_is_pulled_once_for_two_tasks_and_locked_with_its_digest() {
    let registry = Registry::start(None);
    let proxy = FlakyProxy::start(&registry.addr, 0);
    let marker = format!("prebuilt-{}", unique());
    let pushed_as = format!("{}/runner-e2e/prebuilt:{}", registry.addr, unique());
    let digest = push_marker_image(&pushed_as, &marker, None);
    // Pulled through the counting proxy: the same repository under the proxy's address.
    let image = pushed_as.replace(&registry.addr, &proxy.addr);
    let (_d, dataset) = dataset_dir();
    task(&dataset, "first", Some(&image), None);
    task(&dataset, "second", Some(&image), None);
    let run = run(&dataset, &[], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for name in ["images/first", "images/second"] {
        let result = run.result_of(name);
        assert_eq!(
            reward(&result),
            Some(1.0),
            "{name}: {}",
            result["exception_info"]
        );
        assert_eq!(run.marker_of(name), marker, "{name} ran the pulled image");
        assert_eq!(
            run.verifier_file(name, "uploaded.txt"),
            "yes",
            "{name}: without a Dockerfile, environment/ is uploaded to the workdir"
        );
        let locked = run.lock_image(name);
        assert_eq!(locked["origin"], "pulled", "{name}: {locked}");
        assert_eq!(locked["reference"], image.as_str());
        let repository = image.rsplit_once(':').unwrap().0;
        assert!(
            locked["repo_digests"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d == format!("{repository}@{digest}").as_str()),
            "{name}: the lock records the digest the registry returned ({digest}): {locked}"
        );
        assert!(
            locked["engine_version"]
                .as_str()
                .unwrap()
                .starts_with("docker ")
        );
        assert!(locked["id"].as_str().unwrap().starts_with("sha256:"));
    }
    let manifest_gets = proxy
        .requests()
        .iter()
        .filter(|r| r.starts_with("fwd GET") && r.contains("/manifests/"))
        .count();
    assert_eq!(
        manifest_gets,
        1,
        "one pull for both tasks: {:?}",
        proxy.requests()
    );
    assert!(
        run.trial_log_of("images/first")
            .contains(&format!("image {image} (pulled")),
        "trial.log names the image it ran"
    );
}

#[test]
fn a_503_answer_is_retried_and_the_pull_succeeds() {
    let registry = Registry::start(None);
    // Ping, manifest HEAD and GET of the first attempt fail.
    let proxy = FlakyProxy::start(&registry.addr, 3);
    let marker = format!("flaky-{}", unique());
    let pushed_as = format!("{}/runner-e2e/flaky:1", registry.addr);
    push_marker_image(&pushed_as, &marker, None);
    let image = pushed_as.replace(&registry.addr, &proxy.addr);
    let (_d, dataset) = dataset_dir();
    task(&dataset, "flaky", Some(&image), None);
    let run = run(&dataset, &[], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.marker_of("images/flaky"), marker);
    assert_eq!(run.lock_image("images/flaky")["origin"], "pulled");
    let log = run.trial_log_of("images/flaky");
    assert!(
        log.contains("failed (attempt 1/4)")
            && log.contains("503")
            && log.contains("(2 attempt(s))"),
        "the retry and its cause are in trial.log:\n{log}"
    );
    let requests = proxy.requests();
    assert!(
        requests.iter().filter(|r| r.starts_with("503")).count() == 3
            && requests
                .iter()
                .any(|r| r.starts_with("fwd GET") && r.contains("/manifests/")),
        "{requests:?}"
    );
}

#[test]
fn registry_credentials_come_from_the_docker_config_or_a_helper() {
    let registry = Registry::start(Some(("runner", "s3cret-pass")));
    let logged_in = tempfile::tempdir().unwrap();
    login(&registry.addr, "runner", "s3cret-pass", logged_in.path());
    let marker = format!("private-{}", unique());
    let image = format!("{}/runner-e2e/private:1", registry.addr);
    push_marker_image(&image, &marker, Some(logged_in.path()));
    let (_d, dataset) = dataset_dir();
    task(&dataset, "private", Some(&image), None);

    let anonymous = tempfile::tempdir().unwrap();
    let refused = run(&dataset, &[("DOCKER_CONFIG", anonymous.path())], &[]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    let message = refused.failure_of("images/private", "ImagePullError");
    assert!(
        message.contains(&image) && message.contains("1 attempt"),
        "a refused login names the image and is not retried: {message}"
    );

    let allowed = run(&dataset, &[("DOCKER_CONFIG", logged_in.path())], &[]);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    assert_eq!(allowed.marker_of("images/private"), marker);
    assert!(
        allowed
            .trial_log_of("images/private")
            .contains("with credentials from the Docker config")
            && !allowed
                .trial_log_of("images/private")
                .contains("s3cret-pass"),
        "the password never reaches the log"
    );

    // The same credentials through a credential helper on PATH.
    let helper = tempfile::tempdir().unwrap();
    let bin = helper.path().join("bin");
    write(
        bin.join("docker-credential-runnere2e"),
        "#!/bin/sh\nread server\necho \"{\\\"ServerURL\\\":\\\"$server\\\",\\\"Username\\\":\\\"runner\\\",\\\"Secret\\\":\\\"s3cret-pass\\\"}\"\n",
    );
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(bin.join("docker-credential-runnere2e"))
        .status()
        .unwrap();
    write(
        helper.path().join("config.json"),
        &format!(
            "{{\"credHelpers\": {{\"{}\": \"runnere2e\"}}}}",
            registry.addr
        ),
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let via_helper = run(
        &dataset,
        &[("DOCKER_CONFIG", helper.path()), ("PATH", Path::new(&path))],
        &[],
    );
    assert_eq!(via_helper.code, 0, "{}", via_helper.stderr);
    assert_eq!(via_helper.marker_of("images/private"), marker);

    // A build FROM the private image: BuildKit cannot log in without a session, so runner
    // pulls the base with the config's credentials and builds again.
    assert!(
        !image_present(&image),
        "the runs' prune removed what they pulled"
    );
    let (_d2, builds) = dataset_dir();
    let built = format!("on-private-{}", unique());
    task(
        &builds,
        "on-private",
        None,
        Some(&format!("FROM {image}\nRUN echo {built} > /marker\n")),
    );
    let run_build = run(&builds, &[("DOCKER_CONFIG", logged_in.path())], &[]);
    assert_eq!(run_build.code, 0, "{}", run_build.stderr);
    assert_eq!(run_build.marker_of("images/on-private"), built);
    assert!(
        run_build
            .trial_log_of("images/on-private")
            .contains("needs registry credentials for its base image"),
        "{}",
        run_build.trial_log_of("images/on-private")
    );
}

#[test]
fn a_missing_image_is_an_image_pull_error_and_other_tasks_run() {
    let registry = Registry::start(None);
    let missing = format!("{}/runner-e2e/missing:{}", registry.addr, unique());
    let (_d, dataset) = dataset_dir();
    task(&dataset, "missing", Some(&missing), None);
    let marker = format!("built-{}", unique());
    task(&dataset, "built", None, Some(&marker_dockerfile(&marker)));
    let run = run(&dataset, &[], &[]);
    assert_eq!(run.code, 3, "a trial without reward: {}", run.stderr);
    let message = run.failure_of("images/missing", "ImagePullError");
    assert!(
        message.contains(&missing) && message.contains("not found"),
        "names the image and the registry's answer: {message}"
    );
    assert!(run.stderr.contains(&missing), "the terminal shows it");
    assert_eq!(reward(&run.result_of("images/built")), Some(1.0));
    assert_eq!(run.marker_of("images/built"), marker);
}

#[test]
fn the_prebuilt_image_runs_by_default_and_the_dockerfile_with_force_build() {
    let registry = Registry::start(None);
    let image = format!("{}/runner-e2e/both:1", registry.addr);
    let prebuilt = format!("prebuilt-{}", unique());
    push_marker_image(&image, &prebuilt, None);
    let built = format!("built-{}", unique());
    let (_d, dataset) = dataset_dir();
    task(
        &dataset,
        "both",
        Some(&image),
        Some(&marker_dockerfile(&built)),
    );

    let default = run(&dataset, &[], &[]);
    assert_eq!(default.code, 0, "{}", default.stderr);
    assert_eq!(default.marker_of("images/both"), prebuilt);
    assert_eq!(
        default.verifier_file("images/both", "uploaded.txt"),
        "no",
        "with a Dockerfile nothing is uploaded (Harbor's should_upload_environment_dir)"
    );
    let locked = default.lock_image("images/both");
    assert_eq!(
        (locked["origin"].as_str(), locked["reference"].as_str()),
        (Some("pulled"), Some(image.as_str()))
    );

    let forced = run(&dataset, &[], &["--force-build"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert_eq!(forced.marker_of("images/both"), built);
    let locked = forced.lock_image("images/both");
    assert_eq!(locked["origin"], "built", "{locked}");
    assert!(
        locked["reference"]
            .as_str()
            .unwrap()
            .starts_with("runner-task-both:")
    );
    assert_eq!(locked["repo_digests"], serde_json::json!([]));
    assert!(
        forced.trial_log_of("images/both").contains("with BuildKit"),
        "built with BuildKit, output in trial.log"
    );
}

#[test]
fn a_failed_build_shows_its_last_lines_and_a_full_disk_refuses_to_build() {
    let clue = format!("clue-{}", unique());
    let (_d, dataset) = dataset_dir();
    task(
        &dataset,
        "broken",
        None,
        Some(&format!(
            "FROM runner-base:bookworm-py\nRUN echo first-{clue} && echo last-{clue} && exit 3\n"
        )),
    );
    let run_broken = run(&dataset, &[], &[]);
    assert_eq!(run_broken.code, 3);
    let message = run_broken.failure_of("images/broken", "SandboxBuildFailedError");
    assert!(
        message.contains("last lines of the build output")
            && message.contains(&format!("last-{clue}")),
        "{message}"
    );
    assert!(
        run_broken.stderr.contains(&format!("last-{clue}")),
        "on the terminal too"
    );

    let (_d2, full) = dataset_dir();
    task(
        &full,
        "roomy",
        None,
        Some(&marker_dockerfile(&format!("disk-{}", unique()))),
    );
    let refused = run(&full, &[], &["--min-free-disk-mb", "1000000000000"]);
    assert_eq!(refused.code, 3);
    let message = refused.failure_of("images/roomy", "DiskSpaceError");
    assert!(
        message.contains("watermark") && message.contains("building the image"),
        "{message}"
    );
}

#[test]
fn images_pull_warms_the_cache_and_prune_removes_only_what_runner_made() {
    let registry = Registry::start(None);
    let image = format!("{}/runner-e2e/warm:1", registry.addr);
    push_marker_image(&image, "warm", None);
    let (_d, dataset) = dataset_dir();
    task(&dataset, "warm", Some(&image), None);
    task(
        &dataset,
        "local",
        None,
        Some(&marker_dockerfile(&format!("warm-{}", unique()))),
    );
    let state = tempfile::tempdir().unwrap();
    let pulled = runner()
        .args(["images", "pull", "--path"])
        .arg(&dataset)
        .args(low_watermark(&[]))
        .env("RUNNER_STATE_DIR", state.path())
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let (stdout, _) = exited(&pulled, 0);
    assert!(
        stdout.contains("images/warm") && stdout.contains("pulled") && stdout.contains("built"),
        "{stdout}"
    );
    assert!(stdout.contains("2 task(s): 1 pulled, 1 built"), "{stdout}");
    assert!(image_present(&image));
    let ledger: Value =
        serde_json::from_slice(&std::fs::read(state.path().join("images.json")).unwrap()).unwrap();
    assert_eq!(ledger["images"][&image]["origin"], "pulled");

    // An image of the user's own is never pruned, even unused for longer than the cutoff.
    let own = format!("runner-e2e-own:{}", unique());
    crate::registry::docker(&["tag", "runner-base:bookworm-py", &own], None);
    let pruned = runner()
        .args(["images", "prune", "--older-than", "0"])
        .env("RUNNER_STATE_DIR", state.path())
        .output()
        .unwrap();
    let (stdout, _) = exited(&pruned, 0);
    assert!(stdout.contains(&format!("removed {image}")), "{stdout}");
    assert!(stdout.contains("2 image(s) removed"), "{stdout}");
    assert!(!image_present(&image));
    assert!(image_present(&own));
    crate::registry::docker(&["rmi", &own], None);
}
