//! Multi-step tasks (`[[steps]]`): each step's files under `steps/<name>/`, read as Harbor
//! 0.13.1's `TaskPaths` and `Verifier` read them. The reward rules (the `min_reward` gate and
//! the trial reward from the steps') are in [`crate::steps_rewards`].

use std::path::{Path, PathBuf};

use crate::config::StepConfig;
use crate::error::TaskError;
use crate::task::{Task, strip_canary};

/// One step of a loaded multi-step task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStep {
    /// The step's `[[steps]] name`.
    pub name: String,
    /// `steps/<name>/instruction.md`, leading canary lines stripped (as Harbor's
    /// `Task.step_instruction`).
    pub instruction: String,
}

/// Reads every step's instruction (the layout check has made sure each exists).
pub(crate) fn read_steps(
    task_dir: &Path,
    steps: &[StepConfig],
) -> Result<Vec<TaskStep>, TaskError> {
    steps
        .iter()
        .map(|step| {
            let path = task_dir
                .join("steps")
                .join(&step.name)
                .join("instruction.md");
            let text = std::fs::read_to_string(&path).map_err(|e| TaskError::io(&path, e))?;
            Ok(TaskStep {
                name: step.name.clone(),
                instruction: strip_canary(&text),
            })
        })
        .collect()
}

impl Task {
    /// True for a task with `[[steps]]`.
    pub fn is_multi_step(&self) -> bool {
        !self.config.steps.is_empty()
    }

    /// `steps/<name>/`.
    pub fn step_dir(&self, name: &str) -> PathBuf {
        self.dir.join("steps").join(name)
    }

    /// The directories uploaded to `/tests` for step `name`, in upload order: the shared
    /// `tests/` when it exists, then `steps/<name>/tests/` when it exists, so a step's file
    /// replaces a shared one of the same name (Harbor's `Verifier._resolve_tests`). The test
    /// script is `/tests/test.sh` either way: the step's own if it has one, else the shared.
    pub fn step_tests_dirs(&self, name: &str) -> Vec<PathBuf> {
        [self.tests_dir(), self.step_dir(name).join("tests")]
            .into_iter()
            .filter(|dir| dir.is_dir())
            .collect()
    }

    /// The solution the oracle runs for step `name`: `steps/<name>/solution/` when it exists
    /// (then it must hold `solve.sh`), else the task's `solution/` (Harbor's
    /// `OracleAgent._resolve_solution_paths`).
    pub fn step_solution_dir(&self, name: &str) -> PathBuf {
        let own = self.step_dir(name).join("solution");
        if own.is_dir() {
            own
        } else {
            self.solution_dir()
        }
    }

    /// `steps/<name>/workdir/`, when the step has one: its files are uploaded into the
    /// container's working directory before the step, and its `setup.sh` is run there.
    pub fn step_workdir(&self, name: &str) -> Option<PathBuf> {
        let dir = self.step_dir(name).join("workdir");
        dir.is_dir().then_some(dir)
    }
}

#[cfg(test)]
mod tests {
    use crate::Task;
    use crate::test_files::task_dir;

    const TOML: &str = "[[steps]]\nname = \"one\"\nmin_reward = 1.0\n[[steps]]\nname = \"two\"\n";

    fn two_steps() -> tempfile::TempDir {
        task_dir(&[
            ("task.toml", TOML),
            ("environment/Dockerfile", "FROM scratch\n"),
            (
                "steps/one/instruction.md",
                "<!-- canary GUID 1 -->\nFirst.\n",
            ),
            ("steps/one/tests/test.sh", "exit 0\n"),
            ("steps/one/solution/solve.sh", "true\n"),
            ("steps/one/workdir/setup.sh", "true\n"),
            ("steps/two/instruction.md", "Second.\n"),
            ("tests/test.sh", "exit 0\n"),
            ("tests/helper.sh", "true\n"),
            ("solution/solve.sh", "true\n"),
        ])
    }

    #[test]
    fn a_two_step_task_loads_with_its_steps_files() {
        let dir = two_steps();
        let task = Task::load(dir.path()).unwrap();
        assert!(task.is_multi_step());
        assert!(task.unsupported.is_empty());
        let names: Vec<_> = task.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["one", "two"]);
        assert_eq!(task.steps[0].instruction, "First.\n", "canary stripped");
        assert_eq!(task.instruction, "");
        let root = task.dir.clone();
        assert_eq!(
            task.step_tests_dirs("one"),
            [root.join("tests"), root.join("steps/one/tests")]
        );
        assert_eq!(task.step_tests_dirs("two"), [root.join("tests")]);
        assert_eq!(
            task.step_solution_dir("one"),
            root.join("steps/one/solution")
        );
        assert_eq!(task.step_solution_dir("two"), root.join("solution"));
        assert_eq!(
            task.step_workdir("one"),
            Some(root.join("steps/one/workdir"))
        );
        assert_eq!(task.step_workdir("two"), None);
    }

    #[test]
    fn a_step_without_its_instruction_is_refused_naming_the_step() {
        let dir = two_steps();
        std::fs::remove_file(dir.path().join("steps/two/instruction.md")).unwrap();
        let err = Task::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("steps[1].name") && err.contains("steps/two/instruction.md"),
            "{err}"
        );
    }
}
