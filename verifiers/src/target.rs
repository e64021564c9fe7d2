//! What one verification runs: the single-step task's `tests/`, or one step's tests of a
//! multi-step task (the shared `tests/` with `steps/<name>/tests/` on top, as Harbor's
//! `Verifier._resolve_tests` uploads them), with that step's env and user.

// The crate's error type, as every verifier step returns it (see verify.rs).
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tasks::Task;

use crate::error::{VerifierError, VerifierErrorKind};

/// The tests, env, user and output directory of one verification.
#[derive(Debug)]
pub(crate) struct Target {
    /// The host directory uploaded as `/tests` (the merge of several, for a step).
    pub tests_dir: PathBuf,
    /// Holds a merged copy alive until the verification ends.
    _merged: Option<tempfile::TempDir>,
    /// `[verifier].env` (then the step's), resolved.
    pub env: BTreeMap<String, String>,
    /// The user the tests run as.
    pub user: Option<String>,
    /// Where `/logs/verifier` comes back on the host.
    pub host_dir: PathBuf,
    /// True when the verifier's image owns `/tests` and nothing is uploaded (`tests_dir` is
    /// then unused): Harbor's separate verifier (`skip_tests_upload`).
    pub tests_in_image: bool,
}

impl Target {
    /// The task's own tests, into `<trial_dir>/verifier/`.
    pub fn task(task: &Task, trial_dir: &Path) -> Result<Target, VerifierError> {
        Ok(Target {
            tests_dir: task.tests_dir(),
            _merged: None,
            env: env_of(task, &task.config.verifier.env)?,
            user: task.config.verifier.user.as_ref().map(|u| u.as_exec_user()),
            host_dir: trial_dir.join("verifier"),
            tests_in_image: false,
        })
    }

    /// The tests the verifier's image holds at `/tests` (Harbor runs a separate verifier's
    /// `/tests/test.sh` from its image and uploads nothing), with the env and user of the task
    /// (`step` `None`, outputs into `<out_dir>/verifier/`) or of step `step`.
    pub fn in_image(
        task: &Task,
        step: Option<usize>,
        out_dir: &Path,
    ) -> Result<Target, VerifierError> {
        let Some(index) = step else {
            // The task's own env, user and outputs; only where /tests comes from differs.
            return Ok(Target {
                tests_dir: PathBuf::new(),
                tests_in_image: true,
                ..Target::task(task, out_dir)?
            });
        };
        let (env, user) = step_env_and_user(task, index);
        Ok(Target {
            tests_dir: PathBuf::new(),
            _merged: None,
            env: env_of(task, &env)?,
            user,
            host_dir: out_dir.join("verifier"),
            tests_in_image: true,
        })
    }

    /// Step `index`'s tests, into `<step_dir>/verifier/`: the step's `[steps.verifier]` env
    /// over the task's, and its user, else the task's.
    pub fn step(task: &Task, index: usize, step_dir: &Path) -> Result<Target, VerifierError> {
        let step = &task.config.steps[index];
        let (env, user) = step_env_and_user(task, index);
        let dirs = task.step_tests_dirs(&step.name);
        let (tests_dir, merged) = match dirs.as_slice() {
            [only] => (only.clone(), None),
            _ => {
                let merged =
                    merge(&task.dir, &dirs).map_err(|e| VerifierErrorKind::AddTestsDir {
                        task: task.name.clone(),
                        message: format!("cannot stage the tests of step {:?}: {e}", step.name),
                    })?;
                (merged.path().to_path_buf(), Some(merged))
            }
        };
        Ok(Target {
            tests_dir,
            _merged: merged,
            env: env_of(task, &env)?,
            user,
            host_dir: step_dir.join("verifier"),
            tests_in_image: false,
        })
    }
}

/// Step `index`'s verifier env (its `[steps.verifier].env` over the task's `[verifier].env`,
/// unresolved) and user (its own, else the task's).
fn step_env_and_user(task: &Task, index: usize) -> (BTreeMap<String, String>, Option<String>) {
    let step = &task.config.steps[index];
    let mut env = task.config.verifier.env.clone();
    env.extend(step.verifier.env.clone());
    let user = step
        .verifier
        .user
        .as_ref()
        .or(task.config.verifier.user.as_ref())
        .map(|u| u.as_exec_user());
    (env, user)
}

fn env_of(
    task: &Task,
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, VerifierError> {
    task.resolve_env(env).map_err(|source| {
        VerifierErrorKind::Env {
            task: task.name.clone(),
            source,
        }
        .into()
    })
}

/// A temporary directory holding `dirs` (inside `task_dir`) copied in order, a later file
/// replacing an earlier one of the same path. An empty list gives an empty directory (the
/// caller then finds no `test.sh` and says so).
fn merge(task_dir: &Path, dirs: &[PathBuf]) -> std::io::Result<tempfile::TempDir> {
    let root = task_dir.canonicalize()?;
    let staged = tempfile::Builder::new().prefix("runner-tests-").tempdir()?;
    for dir in dirs {
        copy_into(&root, dir, staged.path())?;
    }
    Ok(staged)
}

/// Copies the tree `from` into `to` (files keep their permissions). A link is followed only
/// to a regular file or directory inside `root`, the task directory: the task load refused
/// any other (`tasks::confined`), and this copy, made later, does not trust that nothing
/// changed since; a link out of the task would copy host files (`/proc/self/environ`) into
/// the container's `/tests`.
fn copy_into(root: &Path, from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        let target = to.join(entry.file_name());
        let source = path.canonicalize()?;
        let meta = std::fs::metadata(&source)?;
        if !source.starts_with(root) || !(meta.is_dir() || meta.is_file()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} leads to {}, which is not a file or directory of the task; a task's tests must be its own files",
                    path.display(),
                    source.display()
                ),
            ));
        }
        if meta.is_dir() {
            copy_into(root, &source, &target)?;
        } else {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_tests_go_over_the_shared_ones() {
        let root = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| testkit::files::write(root.path(), rel, text);
        write("tests/test.sh", "shared");
        write("tests/lib/helper.sh", "helper");
        write("steps/one/tests/test.sh", "own");
        write("steps/one/tests/lib/extra.sh", "extra");
        let merged = merge(
            root.path(),
            &[
                root.path().join("tests"),
                root.path().join("steps/one/tests"),
            ],
        )
        .unwrap();
        let read = |rel: &str| std::fs::read_to_string(merged.path().join(rel)).unwrap();
        assert_eq!(read("test.sh"), "own");
        assert_eq!(read("lib/helper.sh"), "helper");
        assert_eq!(read("lib/extra.sh"), "extra");
    }

    #[test]
    fn a_link_out_of_the_task_is_never_copied() {
        let root = tempfile::tempdir().unwrap();
        testkit::files::write(root.path(), "tests/test.sh", "shared");
        testkit::files::write(root.path(), "steps/one/tests/test.sh", "own");
        std::os::unix::fs::symlink("/proc/self/environ", root.path().join("steps/one/tests/e"))
            .unwrap();
        let err = merge(
            root.path(),
            &[
                root.path().join("tests"),
                root.path().join("steps/one/tests"),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("steps/one/tests/e")
                && err.contains("not a file or directory of the task"),
            "{err}"
        );
    }
}
