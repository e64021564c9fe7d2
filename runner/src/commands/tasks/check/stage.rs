//! Staged copies of a task for the probes: the task as it is, except that `solution/` holds
//! only the probe as `solve.sh`, so the oracle agent runs the probe as the agent would. The
//! copy keeps the task's directory name and `environment/`, so its image is the task's.

use std::path::{Path, PathBuf};

use tasks::Task;
use tasks::walk::{Entry, Kind, Links, Next, TreeWalk, Visitor, WalkError};

/// Copies `task` to `<stage_dir>/<label>/<task dir name>` with `script` as its only solution
/// file (with `keep_solution`, beside the task's solution, whose `solve.sh` becomes
/// `solve.real.sh`), and returns the copy's directory.
pub fn probe_copy(
    task: &Task,
    stage_dir: &Path,
    label: &str,
    script: &str,
    keep_solution: bool,
) -> std::io::Result<PathBuf> {
    let name = task.dir.file_name().unwrap_or_default();
    let dest = stage_dir.join(label).join(name);
    if dest.exists() {
        std::fs::remove_dir_all(&dest)?;
    }
    copy_dir(&task.dir, &dest, true)?;
    let solve = dest.join("solution/solve.sh");
    if keep_solution && task.solution_dir().is_dir() {
        copy_dir(&task.solution_dir(), &dest.join("solution"), false)?;
        if solve.exists() {
            std::fs::rename(&solve, dest.join("solution/solve.real.sh"))?;
        }
    }
    std::fs::create_dir_all(solve.parent().unwrap_or(&dest))?;
    std::fs::write(&solve, script)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&solve, std::fs::Permissions::from_mode(0o755))?;
    Ok(dest)
}

/// Copies `from` into `to` (symlinks as symlinks); at the top, `solution/` is left out when
/// `top`.
fn copy_dir(from: &Path, to: &Path, top: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let mut copy = Copy {
        to,
        leave_out_solution: top,
    };
    // `Keep`: the probe's copy is the task as it is, links copied as links, never followed.
    TreeWalk::new(from, Links::Keep)
        .walk(&mut copy)
        .map_err(|stop| {
            stop.into_error(|e| match e {
                WalkError::Io { source, .. } => source,
                other => std::io::Error::other(other.to_string()),
            })
        })
}

/// Where one copy goes.
struct Copy<'a> {
    to: &'a Path,
    leave_out_solution: bool,
}

impl Visitor for Copy<'_> {
    type Error = std::io::Error;

    fn visit(&mut self, entry: &Entry) -> std::io::Result<Next> {
        if self.leave_out_solution && entry.depth == 1 && entry.name == "solution" {
            return Ok(Next::Pass);
        }
        let target = self.to.join(&entry.rel_path);
        match entry.kind {
            Kind::Link(_) => {
                std::os::unix::fs::symlink(std::fs::read_link(&entry.path)?, &target)?;
            }
            Kind::Dir => std::fs::create_dir_all(&target)?,
            _ => {
                std::fs::copy(&entry.path, &target)?;
            }
        }
        Ok(Next::Enter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_has_the_probe_as_its_only_solution() {
        let src = tempfile::tempdir().unwrap();
        let dir = src.path().join("my-task");
        for (path, text) in [
            ("task.toml", ""),
            ("instruction.md", "Do it.\n"),
            ("environment/Dockerfile", "FROM scratch\n"),
            ("tests/test.sh", "exit 0\n"),
            ("solution/solve.sh", "echo answer\n"),
            ("solution/answer.txt", "42\n"),
        ] {
            std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.join(path), text).unwrap();
        }
        let task = Task::read(&dir).unwrap();
        let stage = tempfile::tempdir().unwrap();
        let copy = probe_copy(&task, stage.path(), "conftest", "#!/bin/bash\n", false).unwrap();
        assert_eq!(copy.file_name().unwrap(), "my-task");
        assert!(!copy.join("solution/answer.txt").exists());
        assert_eq!(
            std::fs::read_to_string(copy.join("solution/solve.sh")).unwrap(),
            "#!/bin/bash\n"
        );
        let copied = Task::read(&copy).unwrap();
        assert_eq!(copied.name, task.name);
        assert!(copy.join("environment/Dockerfile").is_file());
        let kept = probe_copy(&task, stage.path(), "broken", "#!/bin/bash\n", true).unwrap();
        assert_eq!(
            std::fs::read_to_string(kept.join("solution/solve.real.sh")).unwrap(),
            "echo answer\n"
        );
        assert!(kept.join("solution/answer.txt").is_file());
        assert_eq!(
            std::fs::read_to_string(kept.join("solution/solve.sh")).unwrap(),
            "#!/bin/bash\n"
        );
    }
}
