//! The tasks a server offers: a dataset (or one task) loaded once, looked up by name or
//! short name, or chosen by a seed.

use std::sync::Arc;

use tasks::Task;

use crate::error::ServeError;

/// The dataset's tasks, sorted by name.
#[derive(Debug, Clone)]
pub struct Catalog {
    tasks: Vec<Arc<Task>>,
}

impl Catalog {
    /// A catalog of `tasks` (sorted by name here).
    pub fn new(mut tasks: Vec<Task>) -> Self {
        tasks.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            tasks: tasks.into_iter().map(Arc::new).collect(),
        }
    }

    /// Every task.
    pub fn tasks(&self) -> &[Arc<Task>] {
        &self.tasks
    }

    /// The task named `name` (its full name, or its short name when that is unambiguous);
    /// without a name, the task a `seed` picks (`seed mod count`), or the first.
    pub fn pick(&self, name: Option<&str>, seed: Option<u64>) -> Result<Arc<Task>, ServeError> {
        if self.tasks.is_empty() {
            return Err(ServeError::UnknownTask(
                "the dataset has no runnable task".into(),
            ));
        }
        let Some(name) = name else {
            let index = seed.map_or(0, |s| (s % self.tasks.len() as u64) as usize);
            return Ok(self.tasks[index].clone());
        };
        if let Some(task) = self.tasks.iter().find(|t| t.name == name) {
            return Ok(task.clone());
        }
        let short: Vec<_> = self
            .tasks
            .iter()
            .filter(|t| t.short_name() == name)
            .collect();
        match short.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ServeError::UnknownTask(format!(
                "no task named {name:?} in the dataset"
            ))),
            many => Err(ServeError::UnknownTask(format!(
                "{name:?} names {} tasks; use the full name ({})",
                many.len(),
                many.iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// Why a task cannot be served, or `None`: the server runs every task (multi-step, and
/// verified in the agent's container or in a separate environment) but those with a network
/// allowlist in any phase of any step (their egress proxy is a trial's).
pub fn unservable(task: &Task) -> Option<String> {
    let allowlist = engine::phases::task_uses_allowlist(&task.config);
    allowlist.then(|| {
        format!(
            "task {} has a network allowlist; runner serve does not run the egress proxy it needs",
            task.name
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::TaskFixture;

    fn catalog(names: &[&str]) -> (tempfile::TempDir, Catalog) {
        let dir = tempfile::tempdir().unwrap();
        let tasks = names
            .iter()
            .enumerate()
            .map(|(i, name)| TaskFixture::new(name).write(&dir.path().join(format!("t{i}"))))
            .collect();
        (dir, Catalog::new(tasks))
    }

    #[test]
    fn tasks_are_found_by_name_short_name_or_seed() {
        let (_dir, catalog) = catalog(&["set/b", "set/a", "other/a", "set/c"]);
        assert_eq!(catalog.pick(Some("set/b"), None).unwrap().name, "set/b");
        assert_eq!(catalog.pick(Some("c"), None).unwrap().name, "set/c");
        assert!(
            catalog
                .pick(Some("a"), None)
                .unwrap_err()
                .to_string()
                .contains("2 tasks")
        );
        assert!(catalog.pick(Some("zz"), None).is_err());
        assert_eq!(catalog.pick(None, None).unwrap().name, "other/a");
        assert_eq!(catalog.pick(None, Some(5)).unwrap().name, "set/a");
        assert_eq!(
            catalog.pick(None, Some(5)).unwrap().name,
            catalog.pick(None, Some(1)).unwrap().name
        );
    }

    #[test]
    fn only_allowlists_are_not_served_separate_verifiers_are() {
        let dir = tempfile::tempdir().unwrap();
        let plain = TaskFixture::new("set/plain").write(&dir.path().join("a"));
        assert_eq!(unservable(&plain), None);
        let allowlist = TaskFixture::new("set/allow")
            .toml("[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"example.test\"]")
            .write(&dir.path().join("b"));
        let refusal = unservable(&allowlist).unwrap();
        assert!(
            refusal.contains("allowlist") && refusal.contains("set/allow"),
            "{refusal}"
        );
        let separate = TaskFixture::new("set/separate")
            .toml("[verifier]\nenvironment_mode = \"separate\"")
            .write(&dir.path().join("c"));
        assert_eq!(unservable(&separate), None);
    }

    #[test]
    fn steps_are_served_unless_a_step_has_an_allowlist() {
        let dir = tempfile::tempdir().unwrap();
        let steps = |name: &str, second: &str| {
            TaskFixture::new(name)
                .toml(&format!(
                    "[[steps]]\nname = \"a\"\n[[steps]]\nname = \"b\"\n{second}"
                ))
                .file("steps/a/instruction.md", "A.\n")
                .file("steps/b/instruction.md", "B.\n")
                .write(&dir.path().join(name.replace('/', "-")))
        };
        let plain = steps("set/steps", "");
        assert!(plain.is_multi_step());
        assert_eq!(unservable(&plain), None);
        let allowlisted = steps(
            "set/step-allow",
            "[steps.verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"example.test\"]",
        );
        let refusal = unservable(&allowlisted).expect("refused");
        assert!(refusal.contains("set/step-allow"), "{refusal}");
    }
}
