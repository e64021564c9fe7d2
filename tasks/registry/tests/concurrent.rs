//! Runs sharing one cache: several resolutions of one dataset at once, against a real git
//! repository (a `file://` URL), fetch it once between them and all get the same verified
//! tasks; nothing is left in staging.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use registry::{Cache, DatasetName, RegistrySource};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn concurrent_runs_fetch_once_and_share_the_verified_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    for task in ["a", "b"] {
        let dir = repo.join("tasks").join(task);
        std::fs::create_dir_all(dir.join("tests")).unwrap();
        std::fs::write(dir.join("task.toml"), "version = \"1.0\"\n").unwrap();
        std::fs::write(dir.join("tests/test.sh"), format!("echo {task}\n")).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "t"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let url = format!("file://{}", repo.display());
    let registry = tmp.path().join("registry.json");
    let task = |name: &str| serde_json::json!({"name": name, "git_url": url, "git_commit_id": commit, "path": format!("tasks/{name}")});
    let rows = serde_json::json!([{"name": "d", "version": "1", "description": "", "tasks": [task("a"), task("b")]}]);
    std::fs::write(&registry, rows.to_string()).unwrap();

    let cache = Cache {
        root: tmp.path().join("cache"),
    };
    let source = RegistrySource::Path(registry);
    let notes = Arc::new(Mutex::new(Vec::<String>::new()));
    let dirs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (cache, source, notes) = (&cache, &source, notes.clone());
                scope.spawn(move || {
                    let mut note = |line: String| notes.lock().unwrap().push(line);
                    let wanted = DatasetName::parse("d").unwrap();
                    registry::resolve(source, &wanted, cache, &mut note).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let fetches = notes
        .lock()
        .unwrap()
        .iter()
        .filter(|n| n.starts_with("fetching"))
        .count();
    assert_eq!(fetches, 1, "{:?}", notes.lock().unwrap());
    for resolved in &dirs {
        assert_eq!(resolved.dir, dirs[0].dir);
        assert_eq!(resolved.tasks, dirs[0].tasks);
        assert_eq!(
            resolved.tasks[0].git_commit_id.as_deref(),
            Some(commit.as_str())
        );
        assert_eq!(
            std::fs::read_to_string(resolved.dir.join("b/tests/test.sh")).unwrap(),
            "echo b\n"
        );
    }
    let staged: Vec<_> = std::fs::read_dir(tmp.path().join("cache/datasets/.tmp"))
        .unwrap()
        .collect();
    assert!(staged.is_empty(), "{staged:?}");
}
