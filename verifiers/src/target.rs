//! What one verification runs: the single-step task's `tests/`, or one step's tests of a
//! multi-step task (the shared `tests/` with `steps/<name>/tests/` on top, as Harbor's
//! `Verifier._resolve_tests` uploads them), with that step's env and user.

// The crate's error type, as every verifier step returns it (see verify.rs).
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tasks::Task;
use tasks::file_filter::{Selection, TaskFileFilter, stage_tree};

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
    /// The task's own tests (less what `.harborignore` excludes), into `<trial_dir>/verifier/`.
    pub fn task(task: &Task, trial_dir: &Path) -> Result<Target, VerifierError> {
        let selected = select_tests(task, &[task.tests_dir()], None)?;
        Ok(Target {
            tests_dir: selected.dir,
            _merged: selected.staged,
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
        let (env, user) = match step {
            // The task's own env and user; only where /tests comes from differs.
            None => (
                task.config.verifier.env.clone(),
                task.config.verifier.user.as_ref().map(|u| u.as_exec_user()),
            ),
            Some(index) => step_env_and_user(task, index),
        };
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
        let selected = select_tests(task, &dirs, Some(&step.name))?;
        Ok(Target {
            tests_dir: selected.dir,
            _merged: selected.staged,
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

/// The directory `/tests` is uploaded from: the one of `dirs` as it is, or a staged copy of
/// them all (a step's shared tests with its own on top, a later file replacing an earlier
/// one) or of one holding a `.harborignore`, less what the task's `.harborignore` files
/// exclude (Harbor 0.26's `TaskFileFilter.select`). A `test.sh` they exclude is refused, as
/// Harbor's `require_included` refuses it.
fn select_tests(
    task: &Task,
    dirs: &[PathBuf],
    step: Option<&str>,
) -> Result<Selection, VerifierError> {
    let failed = |message: String| -> VerifierError {
        VerifierErrorKind::AddTestsDir {
            task: task.name.clone(),
            message,
        }
        .into()
    };
    let whose = step.map_or_else(|| "the task".to_owned(), |s| format!("step {s:?}"));
    let filter = TaskFileFilter::new(&task.dir).map_err(|e| failed(e.to_string()))?;
    // The test.sh that is run: the last directory's that has one.
    if let Some(test_sh) = dirs
        .iter()
        .rev()
        .map(|d| d.join("test.sh"))
        .find(|p| p.exists())
    {
        filter
            .require_included(&test_sh)
            .map_err(|e| failed(e.to_string()))?;
    }
    match dirs {
        [only] => filter
            .select(only)
            .map_err(|e| failed(format!("cannot stage the tests of {whose}: {e}"))),
        _ => {
            let staged = stage_tree(&task.dir, dirs, Some(&filter))
                .map_err(|e| failed(format!("cannot stage the tests of {whose}: {e}")))?;
            Ok(Selection {
                dir: staged.path().to_owned(),
                staged: Some(staged),
            })
        }
    }
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
        let merged = stage_tree(
            root.path(),
            &[
                root.path().join("tests"),
                root.path().join("steps/one/tests"),
            ],
            None,
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
        let err = stage_tree(
            root.path(),
            &[
                root.path().join("tests"),
                root.path().join("steps/one/tests"),
            ],
            None,
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
