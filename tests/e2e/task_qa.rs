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
    task(dir.path(), "windows", "[environment]\nos = \"windows\"\n", true);
    task(
        dir.path(),
        "allowlist",
        "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"example.org\"]\n",
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
    let names: Vec<&str> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["allowlist", "no-image", "windows"], "{stderr}");
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
