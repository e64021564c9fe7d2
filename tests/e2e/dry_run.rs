//! `runner run --dry-run`, `--print-config` and `--history` against the real Docker engine:
//! the plan is printed and nothing happens (no job dir, no image built, no container event
//! of the task), the printed config runs again with `-c`, and earlier jobs' trial times give
//! the estimate.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::files::copy_dir;

use crate::support::{ensure_base_image, exited, runner, workspace_root};

/// A copy of hello-file named `dryrun/<unique>` whose image no engine has yet.
fn unique_task(root: &Path) -> (std::path::PathBuf, String) {
    let unique = format!("t{}", crate::registry::unique());
    let dataset = root.join("dataset");
    let task = dataset.join(&unique);
    copy_dir(&workspace_root().join("tasks/examples/hello-file"), &task);
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let name = format!("dryrun/{unique}");
    std::fs::write(
        task.join("task.toml"),
        toml.replace("examples/hello-file", &name),
    )
    .unwrap();
    let dockerfile = task.join("environment/Dockerfile");
    let text = std::fs::read_to_string(&dockerfile).unwrap();
    std::fs::write(&dockerfile, format!("{text}LABEL dryrun={unique}\n")).unwrap();
    (dataset, name)
}

fn seconds_since_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_dry_run_prints_the_plan_and_starts_nothing() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let (dataset, name) = unique_task(tmp.path());
    let jobs = tmp.path().join("jobs");
    let since = seconds_since_epoch();
    let dry_run = |extra: &[&str]| {
        runner()
            .args(["run", "-a", "oracle", "-k", "3", "--dry-run", "-p"])
            .arg(&dataset)
            .arg("--jobs-dir")
            .arg(&jobs)
            .args(extra)
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap()
    };
    let (text, _) = exited(&dry_run(&[]), 0);
    assert!(text.contains("3 trial(s) of 1 task(s)"), "{text}");
    assert!(text.contains(&name), "{text}");
    assert!(
        text.contains("images: 0 present, 0 to pull, 1 to build"),
        "{text}"
    );
    assert!(
        text.contains("at most") && text.contains("by the task timeouts"),
        "{text}"
    );

    let (out, _) = exited(&dry_run(&["--format", "json"]), 0);
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["schema"], "runner.plan/v1");
    assert_eq!(plan["trials"], 3);
    let row = &plan["tasks"][0];
    assert_eq!(row["task"], name.as_str());
    // hello-file: a 60 s agent timeout and a 60 s verifier timeout.
    assert_eq!(row["bound_sec"], 120.0);
    assert_eq!(row["image"]["action"], "build");
    let tag = row["image"]["reference"].as_str().unwrap().to_owned();
    assert!(tag.starts_with("runner-task-"), "{tag}");

    // Nothing happened: no job dir, no image, no container event of the task.
    assert!(!jobs.exists(), "a dry run wrote {}", jobs.display());
    let inspect = Command::new("docker")
        .args(["image", "inspect", &tag])
        .output()
        .unwrap();
    assert!(!inspect.status.success(), "{tag} was built");
    let events = Command::new("docker")
        .args([
            "events",
            "--since",
            &since.to_string(),
            "--until",
            &seconds_since_epoch().to_string(),
            "--filter",
            &format!("label=runner.task={name}"),
        ])
        .output()
        .unwrap();
    assert!(events.status.success());
    assert_eq!(String::from_utf8_lossy(&events.stdout), "", "engine events");
}

#[test]
fn the_printed_config_runs_again_with_c_and_history_estimates_the_duration() {
    ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let (dataset, name) = unique_task(tmp.path());
    let jobs = tmp.path().join("jobs");
    let printed = runner()
        .args(["run", "-a", "oracle", "-k", "4", "--print-config", "-p"])
        .arg(&dataset)
        .arg("--jobs-dir")
        .arg(&jobs)
        .args(["--job-name", "printed"])
        .output()
        .unwrap();
    let (config, _) = exited(&printed, 0);
    let parsed: Value = serde_json::from_str(&config).unwrap();
    assert_eq!(parsed["n_attempts"], 4);
    assert_eq!(parsed["agents"][0]["name"], "oracle");
    assert!(!jobs.exists());
    let file = tmp.path().join("config.json");
    std::fs::write(&file, &config).unwrap();

    // An earlier job of the task: two trials of 30 s and 50 s, as their records say.
    let history = tmp.path().join("history");
    std::fs::create_dir_all(&history).unwrap();
    std::fs::write(history.join("config.json"), "{}").unwrap();
    for (trial, seconds) in [("a", 30), ("b", 50)] {
        std::fs::create_dir_all(history.join(trial)).unwrap();
        let record = json!({
            "task_name": name,
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": format!("2026-01-01T00:00:{seconds}Z"),
        });
        std::fs::write(history.join(trial).join("result.json"), record.to_string()).unwrap();
    }
    let again = runner()
        .args(["run", "-c"])
        .arg(&file)
        .args(["--dry-run", "--format", "json", "--history"])
        .arg(&history)
        .output()
        .unwrap();
    let (out, _) = exited(&again, 0);
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["job_name"], "printed");
    assert_eq!(plan["trials"], 4);
    assert_eq!(plan["tasks"][0]["history_sec"], 40.0);
    // Four trials of 40 s, four at once.
    assert_eq!(plan["history_sec"], 40.0);
    assert_eq!(plan["history_tasks"], 1);

    let refused = runner()
        .args(["run", "-c"])
        .arg(&file)
        .args(["--dry-run", "--history"])
        .arg(tmp.path().join("nowhere"))
        .output()
        .unwrap();
    let (_, err) = exited(&refused, 2);
    assert!(
        err.contains("--history") && err.contains("nowhere"),
        "{err}"
    );
}
