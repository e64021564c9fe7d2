//! `runner tasks init NAME`: a new task directory that passes `tasks check` as written, to
//! start from: task.toml with the schema's fields commented, an instruction, a Dockerfile
//! FROM the project's offline base image, tests writing the reward with named checks, and a
//! reference solution.

use std::path::{Path, PathBuf};

use crate::exit::{CliError, CommandOutcome};
use crate::say;

/// The files of a new task: path, content, executable.
const FILES: &[(&str, &str, bool)] = &[
    ("task.toml", include_str!("init/task.toml"), false),
    ("instruction.md", include_str!("init/instruction.md"), false),
    (
        "environment/Dockerfile",
        include_str!("init/Dockerfile"),
        false,
    ),
    (
        "environment/numbers.txt",
        include_str!("init/numbers.txt"),
        false,
    ),
    ("tests/test.sh", include_str!("init/test.sh"), true),
    ("solution/solve.sh", include_str!("init/solve.sh"), true),
];

/// Writes the task `name` (`org/name` or `name`) into `<parent>/<name's last part>`; an
/// existing path is refused (nothing is overwritten).
pub fn init(name: &str, parent: &Path) -> Result<CommandOutcome, CliError> {
    let dir = task_dir(name, parent)?;
    write_task(name, &dir)
        .map_err(|e| CliError::runner_because(format!("cannot write {}", dir.display()), e))?;
    say!("{}", dir.display());
    Ok(CommandOutcome::Success)
}

/// Where the task goes; refused when the name is not a task name or the path exists.
fn task_dir(name: &str, parent: &Path) -> Result<PathBuf, CliError> {
    let short = name.rsplit('/').next().unwrap_or(name);
    let valid = |part: &str| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if name.matches('/').count() > 1 || !name.split('/').all(valid) {
        return Err(CliError::bad_input(format!(
            "{name:?} is not a task name; use `name` or `org/name` with letters, digits, '-', '_' and '.'"
        )));
    }
    let dir = parent.join(short);
    if dir.exists() {
        return Err(CliError::bad_input(format!(
            "{} already exists; choose another name or --dir",
            dir.display()
        )));
    }
    Ok(dir)
}

fn write_task(name: &str, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for (path, text, executable) in FILES {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
        std::fs::write(&path, text.replace("{{NAME}}", name))?;
        if *executable {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_task_loads_with_no_finding() {
        let parent = tempfile::tempdir().unwrap();
        write_task(
            "me/sum-numbers",
            &task_dir("me/sum-numbers", parent.path()).unwrap(),
        )
        .unwrap();
        let task = tasks::Task::load(&parent.path().join("sum-numbers")).unwrap();
        assert_eq!(task.name, "me/sum-numbers");
        assert!(task.warnings.is_empty(), "{:?}", task.warnings);
        assert!(
            tasks::lint::lint_task(&task).is_empty(),
            "{:?}",
            tasks::lint::lint_task(&task)
        );
    }

    #[test]
    fn bad_names_and_existing_paths_are_refused() {
        let parent = tempfile::tempdir().unwrap();
        for bad in ["", "a/b/c", "../x", "a b", "org/"] {
            assert!(task_dir(bad, parent.path()).is_err(), "{bad:?}");
        }
        std::fs::create_dir(parent.path().join("taken")).unwrap();
        let err = task_dir("org/taken", parent.path()).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }
}
