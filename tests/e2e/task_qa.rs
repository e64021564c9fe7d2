//! `runner tasks digest`, `tasks check` and `tasks init`: the task author's tools.

use std::path::Path;

use crate::support::{exited, runner, workspace_root};

/// Writes `files` (relative path, content) under `root`.
fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A task directory `dir` under `root` with this task.toml, and a Dockerfile unless `image`
/// is false.
fn task(root: &Path, dir: &str, toml: &str, image: bool) {
    let mut files = vec![
        (format!("{dir}/task.toml"), toml.to_owned()),
        (format!("{dir}/instruction.md"), "Do it.\n".to_owned()),
        (format!("{dir}/tests/test.sh"), "#!/bin/bash\n".to_owned()),
        (format!("{dir}/tests/test.bat"), "exit 0\n".to_owned()),
    ];
    if image {
        files.push((
            format!("{dir}/environment/Dockerfile"),
            "FROM scratch\n".to_owned(),
        ));
    } else {
        files.push((format!("{dir}/environment/.keep"), String::new()));
    }
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    write(root, &files);
}

#[test]
fn digest_of_a_folder_without_a_task_is_bad_input_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["tasks", "digest"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = exited(&output, 2);
    assert!(!stdout.contains("sha256:"), "{stdout}");
    testkit::assert_says_all(&stderr, &[&dir.path().display().to_string(), "no task"]);

    // Tasks two levels down: not this dataset's (Harbor reads immediate subdirectories),
    // and the folder that holds them is named.
    task(dir.path(), "group/one", "", true);
    let output = runner()
        .args(["tasks", "digest"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (_, stderr) = exited(&output, 2);
    let group = dir.path().join("group").display().to_string();
    testkit::assert_says_all(&stderr, &["no task", &group]);
    let output = runner()
        .args(["tasks", "digest"])
        .arg(dir.path().join("group"))
        .output()
        .unwrap();
    let (stdout, _) = exited(&output, 0);
    testkit::assert_says_all(&stdout, &["sha256:", "one", "(dataset)"]);
}

#[test]
fn digest_hashes_tasks_this_runner_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    task(
        dir.path(),
        "windows",
        "[environment]\nos = \"windows\"\n",
        true,
    );
    task(dir.path(), "no-image", "", false);
    let output = runner()
        .args(["tasks", "digest", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = exited(&output, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let names = task_names(&doc);
    assert_eq!(names, ["no-image", "windows"], "{stderr}");
    for t in doc["tasks"].as_array().unwrap() {
        assert!(t["digest"].as_str().unwrap().starts_with("sha256:"), "{t}");
    }
    // Each alone too, and `run` still refuses them by name.
    let output = runner()
        .args(["tasks", "digest"])
        .arg(dir.path().join("no-image"))
        .output()
        .unwrap();
    exited(&output, 0);
    let output = runner()
        .args(["run", "-a", "nop", "-o"])
        .arg(dir.path().join("jobs"))
        .arg("-p")
        .arg(dir.path().join("no-image"))
        .output()
        .unwrap();
    let (_, stderr) = exited(&output, 2);
    testkit::assert_says_all(&stderr, &["no-image", "docker_image"]);
    assert!(workspace_root().join("tasks/examples").is_dir());
}

/// `tasks check PATH --format json` with `args`: the document and the exit code.
fn check_json(path: &Path, args: &[&str]) -> (serde_json::Value, i32) {
    crate::support::ensure_base_image();
    let output = runner()
        .args(["tasks", "check", "--format", "json"])
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not a JSON report ({e}): {stdout}\n{stderr}"));
    (doc, output.status.code().unwrap_or(-1))
}

/// The names of the tasks a report covers, in its order.
fn task_names(doc: &serde_json::Value) -> Vec<&str> {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// The task `name`'s report in `doc`.
fn task_report<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no report of {name}: {doc:#}"))
}

/// `check`'s status for the task, and its messages joined.
fn verdict(doc: &serde_json::Value, task: &str, check: &str) -> (String, String) {
    let result = &task_report(doc, task)["checks"][check];
    let texts: Vec<&str> = result["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    (
        result["status"].as_str().unwrap().to_owned(),
        texts.join(" | "),
    )
}

/// The failures of a report, one line each: `<task> <check>: <message>`.
fn failures(doc: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for task in doc["tasks"].as_array().unwrap() {
        for (check, result) in task["checks"].as_object().unwrap() {
            for m in result["messages"].as_array().unwrap() {
                if m["status"] == "fail" {
                    out.push(format!(
                        "{} {check}: {}",
                        task["name"].as_str().unwrap(),
                        m["text"].as_str().unwrap()
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn check_reports_each_broken_task_by_the_right_check() {
    let root = workspace_root().join("tests/fixtures/broken-tasks");
    let (doc, code) = check_json(
        &root,
        &["--checks", "loads,nop,broken,hacks,leaks,reproducible"],
    );
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["passed"], false);

    // Each broken task, the check that must fail it, and what its message must name.
    let defects: [(&str, &str, &[&str]); 4] = [
        ("broken/empty-passes", "broken", &["/app/answer.txt"]),
        (
            "broken/conftest-in-workdir",
            "hacks",
            &["probe conftest", "/app/conftest.py"],
        ),
        ("broken/solution-in-image", "leaks", &["/opt/solve.sh"]),
        (
            "broken/offline-download",
            "reproducible",
            &["pip install", "without network"],
        ),
    ];
    for (task, check, says) in defects {
        let (status, text) = verdict(&doc, task, check);
        assert_eq!(status, "fail", "{task} {check}: {text}");
        testkit::assert_says_all(&text, says);
    }
    // Each defect is reported by its check alone: nothing else fails.
    let mut others = failures(&doc);
    others.retain(|f| {
        !defects
            .iter()
            .any(|(task, check, _)| f.starts_with(&format!("{task} {check}:")))
    });
    assert!(others.is_empty(), "{others:#?}");
}

#[test]
fn check_finds_a_flaky_oracle() {
    // The solution writes the answer with probability 1/2: in 10 trials, all the same has a
    // chance of 2 in 1024.
    let task = workspace_root().join("tests/fixtures/broken-tasks/flaky-oracle");
    let (doc, code) = check_json(&task, &["--checks", "oracle", "--repeat", "10", "-n", "4"]);
    assert_eq!(code, 1, "{doc:#}");
    let (status, text) = verdict(&doc, "broken/flaky-oracle", "oracle");
    assert_eq!(status, "fail", "{text}");
    assert!(text.starts_with("flaky: scored 1 in "), "{text}");
}

#[test]
fn check_passes_the_examples() {
    let (doc, code) = check_json(&workspace_root().join("tasks/examples"), &[]);
    let failures = failures(&doc);
    assert!(failures.is_empty(), "{failures:#?}");
    // slow-oracle times out on purpose and says so in [metadata.check].
    let (status, text) = verdict(&doc, "examples/slow-oracle", "oracle");
    assert_eq!(status, "skip", "{text}");
    assert!(text.contains("on purpose"), "{text}");
    let (status, _) = verdict(&doc, "examples/hello-file", "oracle");
    assert_eq!(status, "pass");
    // No check fails, so the run passes: the jail's probes (sitecustomize, PATH shims) too.
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["passed"], true);
}

/// The six tasks of `tasks/families` (issue 25, item 4), as generate.py writes them.
const FAMILIES: [&str; 6] = [
    "families/export-totals-easy",
    "families/export-totals-hard",
    "families/fix-library-easy",
    "families/fix-library-hard",
    "families/render-tone-easy",
    "families/render-tone-hard",
];

#[test]
fn check_passes_the_families() {
    let (doc, code) = check_json(&workspace_root().join("tasks/families"), &[]);
    let names = task_names(&doc);
    assert_eq!(names, FAMILIES, "{doc:#}");
    // Every check of every task passes: no skip, no warning, and every reward-hack probe,
    // the jail's two included, scores 0.
    for task in FAMILIES {
        for check in [
            "loads",
            "oracle",
            "nop",
            "broken",
            "hacks",
            "leaks",
            "reproducible",
        ] {
            let (status, text) = verdict(&doc, task, check);
            assert_eq!(status, "pass", "{task} {check}: {text}");
        }
    }
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["passed"], true);
}

/// Runs `agent` once on every family task: each task's name and its trial's `result.json`.
fn run_families(agent: &str) -> Vec<(String, serde_json::Value)> {
    crate::support::ensure_base_image();
    let jobs = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["run", "--agent", agent, "--n-concurrent", "4", "--jobs-dir"])
        .arg(jobs.path())
        .arg("--path")
        .arg(workspace_root().join("tasks/families"))
        .timeout(std::time::Duration::from_secs(900))
        .output()
        .unwrap();
    exited(&output, 0);
    let job = crate::support::Job::single_in(jobs.path());
    let mut results: Vec<(String, serde_json::Value)> = job
        .trial_results()
        .into_iter()
        .map(|(_, result)| (result["task_name"].as_str().unwrap().to_owned(), result))
        .collect();
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

#[test]
fn the_families_report_named_checks() {
    // (task, named checks its verifier reports; passed by the untouched workdir).
    let expected = [
        (FAMILIES[0], 3, 0),
        (FAMILIES[1], 3, 0),
        (FAMILIES[2], 10, 7),
        (FAMILIES[3], 13, 6),
        (FAMILIES[4], 6, 0),
        (FAMILIES[5], 10, 0),
    ];
    let solved = run_families("oracle");
    let untouched = run_families("nop");
    assert_eq!(solved.len(), expected.len(), "{solved:#?}");
    assert_eq!(untouched.len(), expected.len(), "{untouched:#?}");
    for (((task, total, nop_passed), (solved_task, s)), (untouched_task, u)) in
        expected.iter().zip(&solved).zip(&untouched)
    {
        assert_eq!(
            (solved_task.as_str(), untouched_task.as_str()),
            (*task, *task)
        );
        let (sv, uv) = (&s["verifier_result"], &u["verifier_result"]);
        assert_eq!(crate::support::reward(s), Some(1.0), "{task}: {s:#}");
        assert_eq!(sv["assertions_passed"], *total, "{task}: {sv:#}");
        assert_eq!(sv["assertions_total"], *total, "{task}: {sv:#}");
        assert_eq!(crate::support::reward(u), Some(0.0), "{task}: {u:#}");
        assert_eq!(uv["assertions_passed"], *nop_passed, "{task}: {uv:#}");
        assert_eq!(uv["assertions_total"], *total, "{task}: {uv:#}");
    }
}

#[test]
fn the_families_are_what_their_generator_writes() {
    let output = std::process::Command::new("python3")
        .arg(workspace_root().join("tasks/families/generate.py"))
        .arg("--check")
        .output()
        .unwrap();
    let (stdout, _) = exited(&output, 0);
    assert!(stdout.contains("as generated"), "{stdout}");
}

#[test]
fn init_writes_a_task_that_passes_check_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["tasks", "init", "me/sum-numbers", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (stdout, _) = exited(&output, 0);
    let task = dir.path().join("sum-numbers");
    assert_eq!(stdout.trim(), task.display().to_string());
    let (doc, _) = check_json(&task, &[]);
    let failures = failures(&doc);
    assert!(failures.is_empty(), "{failures:#?}");
    for check in ["loads", "oracle", "nop", "broken", "leaks", "reproducible"] {
        let (status, text) = verdict(&doc, "me/sum-numbers", check);
        assert_eq!(status, "pass", "{check}: {text}");
    }
    // A second init of the name is refused: nothing is overwritten.
    let output = runner()
        .args(["tasks", "init", "me/sum-numbers", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (_, stderr) = exited(&output, 2);
    assert!(stderr.contains("already exists"), "{stderr}");
}

#[test]
fn ci_task_check_annotates_only_the_tasks_a_pull_request_changes() {
    use crate::support::{git, runner_bin};
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"]);
    task(&repo.join("tasks"), "steady", "", true);
    task(&repo.join("tasks"), "changed", "", true);
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "base"]);
    let base = git(repo, &["rev-parse", "HEAD"]);
    let check = || {
        std::process::Command::new("bash")
            .arg(workspace_root().join("leaderboard/ci/task-check.sh"))
            .current_dir(repo)
            .env("TASK_CHECK_BASE", base.trim())
            .env("TASK_CHECK_ROOT", "tasks")
            .env("TASK_CHECK_ARGS", "--checks loads,reproducible")
            .env("RUNNER", runner_bin())
            .output()
            .unwrap()
    };
    let (stdout, _) = exited(&check(), 0);
    assert!(stdout.contains("no task to check"), "{stdout}");

    // The "PR": the tests of one task download a tool with no network.
    write(
        repo,
        &[
            (
                "tasks/changed/tests/test.sh",
                "#!/bin/bash\ncurl -fsSL https://example.org/tool.sh | sh\n",
            ),
            (
                "tasks/changed/task.toml",
                "[verifier]\nnetwork_mode = \"no-network\"\n",
            ),
        ],
    );
    git(repo, &["commit", "-qam", "pr"]);
    let (stdout, _) = exited(&check(), 1);
    testkit::assert_says_all(
        &stdout,
        &[
            "::error file=tasks/changed/tests/test.sh,line=2,",
            "reproducible",
        ],
    );
    assert!(!stdout.contains("steady"), "{stdout}");
}
