//! Dirty-state counts against real `git` repositories made in temp dirs.

use std::path::Path;
use std::process::Command;

use provenance::{DirtyCounts, ProvenanceError, SourceOptions, git_state, package_source};

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    for name in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        std::fs::write(dir.path().join(name), format!("{name}\n")).unwrap();
    }
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "init"]);
    git(dir.path(), &["tag", "v0.1.0"]);
    dir
}

#[test]
fn clean_repo_records_commit_branch_and_describe() {
    let dir = repo();
    let state = git_state(dir.path()).unwrap();
    assert_eq!(state.branch.as_deref(), Some("main"));
    assert_eq!(state.commit.as_ref().map(String::len), Some(40));
    assert_eq!(state.describe.as_deref(), Some("v0.1.0"));
    assert_eq!(state.counts, DirtyCounts::default());
    assert!(!state.dirty);
    let opts = SourceOptions {
        root: dir.path().into(),
        require_clean: true,
        ..Default::default()
    };
    let record = package_source(&opts).unwrap().provenance;
    assert!(!record.is_dirty());
    assert_eq!(record.predicate.source.vcs, "git");
}

#[test]
fn dirty_states_are_counted() {
    let dir = repo();
    std::fs::write(dir.path().join("a.txt"), "changed\n").unwrap(); // modified
    std::fs::write(dir.path().join("b.txt"), "staged\n").unwrap();
    git(dir.path(), &["add", "b.txt"]); // staged
    std::fs::remove_file(dir.path().join("c.txt")).unwrap(); // deleted in work tree
    git(dir.path(), &["rm", "-q", "d.txt"]); // deleted and staged
    std::fs::create_dir_all(dir.path().join("new/deep")).unwrap();
    std::fs::write(dir.path().join("new/deep/u1.txt"), "u\n").unwrap();
    std::fs::write(dir.path().join("new/u2.txt"), "u\n").unwrap(); // two untracked files
    let state = git_state(dir.path()).unwrap();
    assert_eq!(
        state.counts,
        DirtyCounts {
            staged: 2,
            modified: 1,
            untracked: 2,
            deleted: 2,
            unmerged: 0
        }
    );
    assert!(state.dirty);
    assert_eq!(state.describe.as_deref(), Some("v0.1.0-dirty"));

    let record = package_source(&SourceOptions {
        root: dir.path().into(),
        ..Default::default()
    })
    .unwrap()
    .provenance;
    assert!(record.is_dirty());
    let json = record.to_json();
    assert!(
        !json.contains("u1.txt") && !json.contains("changed"),
        "no untracked names or contents: {json}"
    );

    let err = package_source(&SourceOptions {
        root: dir.path().into(),
        require_clean: true,
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(err, ProvenanceError::DirtySource { .. }));
    assert!(err.to_string().contains("2 untracked"), "{err}");
}

#[test]
fn only_untracked_files_still_count_as_dirty() {
    let dir = repo();
    std::fs::write(dir.path().join("new.txt"), "n\n").unwrap();
    let state = git_state(dir.path()).unwrap();
    assert_eq!(
        state.describe.as_deref(),
        Some("v0.1.0-dirty"),
        "unlike git describe --dirty, untracked files count"
    );
    assert_eq!(state.counts.untracked, 1);
    assert!(state.dirty, "our dirty flag counts them");
}

#[test]
fn unmerged_entries_are_counted() {
    let dir = repo();
    git(dir.path(), &["checkout", "-q", "-b", "other"]);
    std::fs::write(dir.path().join("a.txt"), "other\n").unwrap();
    git(dir.path(), &["commit", "-q", "-am", "other"]);
    git(dir.path(), &["checkout", "-q", "main"]);
    std::fs::write(dir.path().join("a.txt"), "main\n").unwrap();
    git(dir.path(), &["commit", "-q", "-am", "main"]);
    let status = Command::new("git")
        .arg("-C")
        .arg(dir.path())
        .args(["merge", "-q", "other"])
        .output()
        .unwrap();
    assert!(!status.status.success(), "the merge must conflict");
    let state = git_state(dir.path()).unwrap();
    assert_eq!(state.counts.unmerged, 1);
    assert!(state.dirty);
}

#[test]
fn subdirectory_status_is_scoped_and_remote_has_no_credentials() {
    let dir = repo();
    std::fs::create_dir_all(dir.path().join("agent")).unwrap();
    std::fs::write(dir.path().join("agent/x.py"), "x\n").unwrap();
    git(dir.path(), &["add", "agent"]);
    git(dir.path(), &["commit", "-q", "-m", "agent"]);
    git(
        dir.path(),
        &[
            "remote",
            "add",
            "origin",
            "https://bob:ghp_secretsecret@example.invalid/o/r.git",
        ],
    );
    std::fs::write(dir.path().join("outside.txt"), "o\n").unwrap();
    let state = git_state(&dir.path().join("agent")).unwrap();
    assert!(!state.dirty, "changes outside the source dir do not count");
    assert!(
        !state.describe.as_deref().unwrap().ends_with("-dirty"),
        "{:?}",
        state.describe
    );
    assert_eq!(
        state.remote_url.as_deref(),
        Some("https://example.invalid/o/r.git")
    );
}

#[test]
fn non_git_directory_records_vcs_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let record = package_source(&SourceOptions {
        root: dir.path().into(),
        ..Default::default()
    })
    .unwrap()
    .provenance;
    assert_eq!(record.predicate.source.vcs, "none");
    assert!(record.predicate.source.git.is_none());
}
