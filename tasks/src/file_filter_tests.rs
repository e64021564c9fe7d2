use super::*;
use crate::test_files::{HARBORIGNORE_CASE, task_dir, write_files};

/// A task with [`HARBORIGNORE_CASE`] and a step's rules; what each path is, as Harbor 0.26's
/// own `TaskFileFilter.is_excluded` says (checked with harbor==0.26.0 on the same tree).
fn task_with_rules() -> tempfile::TempDir {
    let dir = task_dir(&[
        ("task.toml", ""),
        ("tests/test.sh", "#!/bin/bash\n"),
        ("notes.txt", "out of scope: kept"),
        ("solution/solve.sh", "echo hi\n"),
        ("steps/one/tests/.harborignore", "big/\n"),
        ("steps/one/tests/big/data.bin", "excluded"),
        ("steps/one/tests/test.sh", "exit 0\n"),
    ]);
    write_files(dir.path(), HARBORIGNORE_CASE);
    dir
}

/// The files under `dir`, relative and sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(crate::digest::posix_relative(dir, &path));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn paths_are_excluded_as_harbor_excludes_them() {
    let dir = task_with_rules();
    let filter = TaskFileFilter::new(dir.path()).unwrap();
    let excluded = |rel: &str| filter.is_excluded(&dir.path().join(rel)).unwrap();
    for rel in [
        "tests/.harborignore",
        "tests/run.log",
        "tests/cache",
        "tests/cache/x.bin",
        "tests/sub/keep.log",
        "solution/notes.md",
        "steps/one/tests/big/data.bin",
        ".harborignore",
    ] {
        assert!(excluded(rel), "{rel} should be excluded");
    }
    for rel in [
        "tests/test.sh",
        "tests/keep.log",
        "tests/sub/other.txt",
        "notes.txt",
        "solution/solve.sh",
        "steps/one/tests/test.sh",
        "task.toml",
    ] {
        assert!(!excluded(rel), "{rel} should be kept");
    }
}

#[test]
fn a_link_is_excluded_when_its_target_in_the_task_is() {
    let dir = task_with_rules();
    std::os::unix::fs::symlink("cache/x.bin", dir.path().join("tests/alias.bin")).unwrap();
    std::os::unix::fs::symlink("keep.log", dir.path().join("tests/alias.txt")).unwrap();
    let filter = TaskFileFilter::new(dir.path()).unwrap();
    assert!(
        filter
            .is_excluded(&dir.path().join("tests/alias.bin"))
            .unwrap()
    );
    assert!(
        !filter
            .is_excluded(&dir.path().join("tests/alias.txt"))
            .unwrap()
    );
}

#[test]
fn a_selection_copies_only_when_a_rule_file_is_there_and_leaves_the_excluded_out() {
    let dir = task_with_rules();
    let filter = TaskFileFilter::new(dir.path()).unwrap();
    let tests = filter.select(&dir.path().join("tests")).unwrap();
    assert!(tests.staged.is_some());
    assert_eq!(
        files_in(&tests.dir),
        ["keep.log", "sub/other.txt", "test.sh"]
    );
    write_files(dir.path(), &[("environment/Dockerfile", "FROM scratch\n")]);
    let missing = filter.select(&dir.path().join("nothing-here")).unwrap();
    assert_eq!(missing.dir, dir.path().join("nothing-here"));
    let plain = filter.select(&dir.path().join("environment")).unwrap();
    assert!(plain.staged.is_none());
    assert_eq!(plain.dir, dir.path().join("environment"));
}

#[test]
fn an_excluded_required_input_is_refused_naming_it() {
    let dir = task_dir(&[
        ("tests/test.sh", "exit 0\n"),
        ("tests/.harborignore", "*.sh\n"),
    ]);
    let filter = TaskFileFilter::new(dir.path()).unwrap();
    let test_sh = dir.path().join("tests/test.sh");
    let err = filter.require_included(&test_sh).unwrap_err().to_string();
    assert!(
        err.contains("tests/test.sh") && err.contains(".harborignore"),
        "{err}"
    );
    assert!(
        filter
            .require_included(&dir.path().join("tests/other"))
            .is_ok()
    );
}

#[test]
fn a_staged_tree_refuses_a_link_out_of_the_task() {
    let dir = task_dir(&[("tests/test.sh", "exit 0\n")]);
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("tests/host")).unwrap();
    let err = stage_tree(dir.path(), &[dir.path().join("tests")], None).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
}

#[test]
fn scope_is_tests_and_solution_of_the_task_and_its_steps() {
    assert!(in_scope("tests", true));
    assert!(!in_scope("tests", false));
    assert!(in_scope("tests/a/b.txt", false));
    assert!(in_scope("steps/one/solution/x", false));
    assert!(!in_scope("steps/one/environment/x", false));
    assert!(!in_scope("environment/tests/x", false));
}

#[test]
fn a_steps_merged_tests_leave_out_what_either_directory_excludes() {
    let dir = task_with_rules();
    write_files(dir.path(), &[("steps/one/tests/own.txt", "kept")]);
    let filter = TaskFileFilter::new(dir.path()).unwrap();
    let dirs = [dir.path().join("tests"), dir.path().join("steps/one/tests")];
    let staged = stage_tree(dir.path(), &dirs, Some(&filter)).unwrap();
    assert_eq!(
        files_in(staged.path()),
        ["keep.log", "own.txt", "sub/other.txt", "test.sh"]
    );
}

#[test]
fn rules_reached_through_a_linked_directory_apply_and_without_rules_only_the_rule_files_go() {
    let dir = task_dir(&[
        ("tests/test.sh", "exit 0\n"),
        ("shared/.harborignore", "*.tmp\n"),
        ("shared/x.tmp", "excluded through the link"),
    ]);
    let filter = TaskFileFilter::new(dir.path()).unwrap();
    assert!(
        !filter
            .is_excluded(&dir.path().join("tests/test.sh"))
            .unwrap()
    );
    std::os::unix::fs::symlink("../shared", dir.path().join("tests/shared")).unwrap();
    let filter = TaskFileFilter::new(dir.path()).unwrap();
    assert!(holds_ignore_file(dir.path(), &dir.path().join("tests")).unwrap());
    // A link out of the task is never walked, whatever it holds.
    let outside = task_dir(&[(".harborignore", "*\n")]);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("solution")).unwrap();
    assert!(!holds_ignore_file(dir.path(), &dir.path().join("solution")).unwrap());
    assert!(
        filter
            .is_excluded(&dir.path().join("tests/shared/x.tmp"))
            .unwrap()
    );
    let plain = task_dir(&[
        ("tests/test.sh", "exit 0\n"),
        ("environment/.harborignore", ""),
    ]);
    let filter = TaskFileFilter::new(plain.path()).unwrap();
    assert!(
        filter
            .is_excluded(&plain.path().join("environment/.harborignore"))
            .unwrap()
    );
    assert!(
        !filter
            .is_excluded(&plain.path().join("tests/test.sh"))
            .unwrap()
    );
}
