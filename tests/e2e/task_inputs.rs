//! Task inputs read as the task's own files, through the real binary (issue 29, item 5): a
//! step's test linked to the runner's environment, and a `${VAR}` template naming a host
//! variable the job does not pass, are refused before any container starts, naming the file.

use std::path::Path;

use crate::support::{Job, ensure_base_image, exited, runner};

/// A two-step task whose step `draft` has `tests/e -> /proc/self/environ`, the confirmed
/// probe: merged over the shared tests, it copied the runner's whole environment into the
/// container's `/tests`.
fn leaky_step_task(root: &Path) {
    let write = |rel: &str, text: &str| testkit::files::write(root, rel, text);
    write("task.toml", "[[steps]]\nname = \"draft\"\n");
    write("environment/Dockerfile", "FROM runner-test-base\n");
    write("steps/draft/instruction.md", "Draft it.\n");
    write(
        "steps/draft/tests/test.sh",
        "tr '\\0' '\\n' < /tests/e > /logs/verifier/leak.txt\n",
    );
    write("tests/test.sh", "exit 0\n");
    std::os::unix::fs::symlink("/proc/self/environ", root.join("steps/draft/tests/e")).unwrap();
}

#[test]
fn a_steps_test_linked_out_of_the_task_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("leaky");
    leaky_step_task(&task);
    let jobs = dir.path().join("jobs");
    let output = runner()
        .args(["run", "--agent", "oracle", "--jobs-dir"])
        .arg(&jobs)
        .arg("--path")
        .arg(&task)
        .env("RUNNER_TEST_SECRET_TOKEN", "must-never-leave-the-host")
        .output()
        .unwrap();
    let (_, stderr) = exited(&output, 2);
    assert!(
        stderr.contains("steps/draft/tests/e") && stderr.contains("outside the task directory"),
        "{stderr}"
    );
    // Nothing ran: no job dir holds a trial.
    let trials = std::fs::read_dir(&jobs)
        .map(|jobs| {
            jobs.flatten()
                .flat_map(|j| std::fs::read_dir(j.path()).into_iter().flatten())
                .count()
        })
        .unwrap_or(0);
    assert_eq!(trials, 0);
}

#[test]
fn a_template_naming_an_unpassed_host_variable_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("grabby");
    let write = |rel: &str, text: &str| testkit::files::write(&task, rel, text);
    write(
        "task.toml",
        "[environment]\n[environment.env]\nGRAB = \"${RUNNER_E2E_HOST_VALUE}\"\n",
    );
    write("environment/Dockerfile", "FROM runner-test-base\n");
    write("instruction.md", "Nothing.\n");
    write("tests/test.sh", "exit 0\n");
    let output = runner()
        .args(["run", "--agent", "oracle", "--jobs-dir"])
        .arg(dir.path().join("jobs"))
        .arg("--path")
        .arg(&task)
        .env("RUNNER_E2E_HOST_VALUE", "host-only-value")
        .output()
        .unwrap();
    let (stdout, stderr) = exited(&output, 2);
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains("task.toml")
            && all.contains("RUNNER_E2E_HOST_VALUE")
            && all.contains("--task-env-from RUNNER_E2E_HOST_VALUE"),
        "{all}"
    );
    assert!(!all.contains("host-only-value"), "{all}");
}

/// A passed variable reaches the container, and the trial identity records it only as a
/// digest keyed by the job's own key (kept, 0600, in the job dir; a resume finds the trial).
#[test]
fn a_passed_host_variable_reaches_the_task_and_is_recorded_keyed() {
    ensure_base_image();
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("greets");
    let write = |rel: &str, text: &str| testkit::files::write(&task, rel, text);
    write(
        "task.toml",
        "[environment]\n[environment.env]\nGREETING = \"${RUNNER_E2E_GREETING}\"\n",
    );
    write("environment/Dockerfile", "FROM runner-base:bookworm-py\n");
    write("instruction.md", "Nothing.\n");
    write("solution/solve.sh", "true\n");
    write(
        "tests/test.sh",
        "if [ \"$GREETING\" = bonjour ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
    );
    let jobs = dir.path().join("jobs");
    let run = |extra: &[&str]| {
        runner()
            .args([
                "run",
                "--agent",
                "oracle",
                "--task-env-from",
                "RUNNER_E2E_GREETING",
            ])
            .args(extra)
            .arg("--path")
            .arg(&task)
            .env("RUNNER_E2E_GREETING", "bonjour")
            .output()
            .unwrap()
    };
    let output = run(&["--jobs-dir", jobs.to_str().unwrap()]);
    exited(&output, 0);
    let job = Job::single_in(&jobs);
    let results = job.trial_results();
    assert_eq!(results.len(), 1);
    let (name, result) = &results[0];
    assert_eq!(
        result["verifier_result"]["rewards"]["reward"], 1.0,
        "{result:#}"
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.dir.join(name).join("config.json")).unwrap())
            .unwrap();
    let digest = config["identity"]["task_env"].as_str().unwrap();
    assert!(digest.starts_with("hmac-sha256:"), "{digest}");
    let key = job.dir.join(".task-env-key");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    // A resume with the same flags finds the trial complete: the same key, the same name.
    let output = run(&["--resume", job.dir.to_str().unwrap()]);
    let (_, stderr) = exited(&output, 0);
    assert!(stderr.contains("1 trial(s) complete and kept"), "{stderr}");
}
