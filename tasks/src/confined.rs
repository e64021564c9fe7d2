//! A task directory read as the task's own files: no link in it leads out of it.
//!
//! The runner reads a task's files on the host: `task.toml` and `instruction.md` at load, every
//! hashed file for the digest, a step's tests when they are merged over the shared ones, and
//! dataset files. A link among them to `/proc/self/environ` or `~/.docker/config.json` would
//! carry the runner's environment or credentials into a container or a record; a link to
//! `/dev/zero`, or a FIFO, would hang the load; a directory link to its own ancestor would walk
//! forever. So before anything of a task is read, every entry of the parts the runner reads is
//! checked without following links: regular files and directories pass, a link passes when its
//! resolved target is a regular file or directory inside the task directory (and, for a
//! directory, holds no directory link itself, so no walk can loop), a dangling link passes
//! (nothing can read through it), and anything else is refused naming the file. Links are
//! resolved by the one walker's rule ([`crate::walk`]).

use std::path::{Component, Path, PathBuf};

use crate::error::TaskError;
use crate::walk::{self, Entry, Kind, LinkTo, Links, Next, Stopped, TreeWalk, Visitor};

/// The top-level files of a task the runner reads (the digest's, plus its ignore rules).
const READ_FILES: [&str; 4] = ["task.toml", "instruction.md", "README.md", ".gitignore"];
/// The task's directories the runner reads or uploads.
const READ_DIRS: [&str; 4] = ["environment", "tests", "solution", "steps"];

/// Checks the parts of `task_dir` the runner reads: see the module doc.
pub fn check_task_dir(task_dir: &Path) -> Result<(), TaskError> {
    let root = task_dir
        .canonicalize()
        .map_err(|e| TaskError::io(task_dir, e))?;
    let mut check = Check {
        dir_links: Vec::new(),
    };
    for name in READ_FILES.iter().chain(READ_DIRS.iter()) {
        let path = task_dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            // `ToFiles`: every link is resolved and checked, none entered, so a directory
            // link is looked at once, where it is, and nothing can loop.
            TreeWalk::new(&path, Links::ToFiles)
                .confined_to(&root)
                .walk(&mut check)
                .map_err(Stopped::into_inner)?;
        } else {
            let kind = if meta.is_file() {
                Kind::File
            } else if meta.file_type().is_symlink() {
                Kind::Link(walk::resolve_inside(&root, &path)?)
            } else {
                Kind::Special
            };
            check.entry(&path, &kind)?;
        }
    }
    check.no_nested_dir_links()
}

/// Where `path`, a file named by a task or dataset, leads, when it stays inside `root` (both
/// absolute): refuses an absolute path, a `..` component, and a link out of `root`.
pub fn contained_file(
    root: &Path,
    rel: &str,
    named_in: &Path,
    field: &str,
) -> Result<PathBuf, TaskError> {
    let relative = Path::new(rel);
    let escapes = relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if rel.is_empty() || escapes {
        return Err(TaskError::invalid(
            named_in,
            field,
            format!(
                "{rel:?} is not a path inside {}: name a file relative to it, without `..` or a leading `/`",
                root.display()
            ),
        ));
    }
    let path = root.join(relative);
    let canonical_root = root.canonicalize().map_err(|e| TaskError::io(root, e))?;
    if std::fs::symlink_metadata(&path).is_ok()
        && let LinkTo::Special(target) = walk::resolve_inside(&canonical_root, &path)?
    {
        return Err(not_file_or_dir(&path, &target));
    }
    Ok(path)
}

/// The check of one task: the directory links it found so far.
struct Check {
    /// Directory links found: (the link's own canonical location, its canonical target).
    dir_links: Vec<(PathBuf, PathBuf)>,
}

impl Visitor for Check {
    type Error = TaskError;

    fn visit(&mut self, entry: &Entry) -> Result<Next, TaskError> {
        self.entry(&entry.path, &entry.kind)?;
        Ok(Next::Enter)
    }
}

impl Check {
    fn entry(&mut self, path: &Path, kind: &Kind) -> Result<(), TaskError> {
        match kind {
            Kind::Dir | Kind::File | Kind::Link(LinkTo::File(_) | LinkTo::Dangling) => Ok(()),
            Kind::Link(LinkTo::Dir(target)) => {
                let parent = path.parent().unwrap_or(path);
                let own = parent
                    .canonicalize()
                    .map_err(|e| TaskError::io(parent, e))?
                    .join(path.file_name().unwrap_or_default());
                self.dir_links.push((own, target.clone()));
                Ok(())
            }
            Kind::Link(LinkTo::Special(target)) => Err(not_file_or_dir(path, target)),
            Kind::Special | Kind::Link(LinkTo::Unresolved) => Err(refused(
                path,
                "not a regular file, directory or link (a FIFO, socket or device)",
            )),
        }
    }

    /// Refuses a directory link whose target holds a directory link (itself included): a walk
    /// that follows links, as the checksum's does, would have to go round it or into it again.
    fn no_nested_dir_links(&self) -> Result<(), TaskError> {
        for (_, target) in &self.dir_links {
            if let Some((inner, _)) = self
                .dir_links
                .iter()
                .find(|(own, _)| own.starts_with(target))
            {
                return Err(refused(
                    inner,
                    &format!(
                        "a directory link inside {}, which a directory link also leads to: links \
                         to directories may not lead to one another or to themselves",
                        target.display()
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn not_file_or_dir(path: &Path, target: &Path) -> TaskError {
    refused(
        path,
        &format!(
            "a link to {}, which is not a regular file or directory",
            target.display()
        ),
    )
}

fn refused(path: &Path, problem: &str) -> TaskError {
    TaskError::NotOwnFile {
        path: path.to_path_buf(),
        problem: problem.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::test_files::task_dir;

    fn task() -> tempfile::TempDir {
        task_dir(&[
            ("task.toml", "[verifier]\ntimeout_sec = 10\n"),
            ("instruction.md", "Do it.\n"),
            ("environment/Dockerfile", "FROM scratch\n"),
            ("tests/test.sh", "exit 0\n"),
            ("tests/lib/helper.sh", "true\n"),
        ])
    }

    fn refusal(dir: &Path) -> String {
        check_task_dir(dir).unwrap_err().to_string()
    }

    #[test]
    fn a_plain_task_and_links_inside_it_pass() {
        let dir = task();
        symlink("lib/helper.sh", dir.path().join("tests/helper.sh")).unwrap();
        symlink("../tests/lib", dir.path().join("environment/lib")).unwrap();
        symlink("/nonexistent/anywhere", dir.path().join("tests/dangling")).unwrap();
        // Outside the parts the runner reads, nothing is looked at.
        symlink("/etc/passwd", dir.path().join("notes")).unwrap();
        check_task_dir(dir.path()).unwrap();
    }

    #[test]
    fn links_out_of_the_task_are_refused_naming_the_file() {
        for (rel, target) in [
            ("tests/e", "/proc/self/environ"),
            ("instruction.md", "/etc/hostname"),
            ("tests/up", "../.."),
            ("environment/ctx", "/"),
        ] {
            let dir = task();
            let path = dir.path().join(rel);
            let _ = std::fs::remove_file(&path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            symlink(target, &path).unwrap();
            let err = refusal(dir.path());
            assert!(
                err.contains(rel) && err.contains("outside the task directory"),
                "{rel}: {err}"
            );
        }
    }

    #[test]
    fn task_toml_through_a_link_out_is_refused_by_task_load() {
        let dir = task();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("task.toml"), "").unwrap();
        std::fs::remove_file(dir.path().join("task.toml")).unwrap();
        symlink(
            elsewhere.path().join("task.toml"),
            dir.path().join("task.toml"),
        )
        .unwrap();
        let err = crate::Task::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("task.toml") && err.contains("outside the task directory"),
            "{err}"
        );
    }

    #[test]
    fn devices_fifos_and_links_to_them_are_refused() {
        let dir = task();
        symlink("/dev/zero", dir.path().join("tests/zero")).unwrap();
        assert!(refusal(dir.path()).contains("tests/zero"));
        let dir = task();
        let fifo = dir.path().join("instruction.md");
        std::fs::remove_file(&fifo).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let err = refusal(dir.path());
        assert!(
            err.contains("instruction.md") && err.contains("FIFO"),
            "{err}"
        );
    }

    #[test]
    fn directory_links_that_could_loop_are_refused() {
        let dir = task();
        symlink("..", dir.path().join("tests/lib/up")).unwrap();
        assert!(refusal(dir.path()).contains("directory link"));
        let dir = task();
        std::fs::create_dir_all(dir.path().join("tests/a")).unwrap();
        std::fs::create_dir_all(dir.path().join("tests/b")).unwrap();
        symlink("../b", dir.path().join("tests/a/to-b")).unwrap();
        symlink("../a", dir.path().join("tests/b/to-a")).unwrap();
        assert!(refusal(dir.path()).contains("directory link"));
    }

    #[test]
    fn contained_files_stay_inside() {
        let dir = task();
        let root = dir.path();
        let manifest = root.join("dataset.toml");
        assert_eq!(
            contained_file(root, "tests/test.sh", &manifest, "files[0].path").unwrap(),
            root.join("tests/test.sh")
        );
        for bad in ["/etc/passwd", "../x", "tests/../../x", ""] {
            let err = contained_file(root, bad, &manifest, "files[0].path")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("files[0].path") && err.contains("dataset.toml"),
                "{bad}: {err}"
            );
        }
        symlink("/etc/passwd", root.join("leak")).unwrap();
        let err = contained_file(root, "leak", &manifest, "files[0].path").unwrap_err();
        assert!(err.to_string().contains("outside"), "{err}");
    }
}
