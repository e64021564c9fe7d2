//! A dataset: a directory of task directories, optionally described by `dataset.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::digest::{dataset_digest, sha256_hex};
use crate::error::TaskError;
use crate::task::Task;

/// A loaded dataset: the tasks that loaded and the ones that did not.
#[derive(Debug)]
pub struct Dataset {
    /// The dataset directory (or the single task's directory).
    pub dir: PathBuf,
    /// The dataset name: `dataset.toml`'s `[dataset].name`, else the directory name.
    pub name: String,
    /// Tasks that loaded, sorted by name.
    pub tasks: Vec<Task>,
    /// Tasks that did not load, each with its error; they are reported and skipped.
    pub skipped: Vec<TaskError>,
    /// Extra dataset files (`[[files]]`) with their sha256 hex.
    pub files: Vec<(String, String)>,
    /// True when the path was a single task directory, not a dataset.
    pub single_task: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DatasetToml {
    dataset: DatasetSection,
    tasks: Vec<DatasetTaskEntry>,
    files: Vec<DatasetFileEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DatasetSection {
    name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DatasetTaskEntry {
    name: String,
    digest: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DatasetFileEntry {
    path: String,
}

impl Dataset {
    /// Loads `path` to run it: a task directory (has `task.toml`) or a directory of task
    /// directories. Tasks that do not load, including valid Harbor tasks that use a feature
    /// the runner cannot run yet, are listed in `skipped`; a lone task that does not load is
    /// an `Err`. Duplicate task names and `dataset.toml` entries naming no task are errors.
    pub fn load(path: &Path) -> Result<Dataset, TaskError> {
        let mut dataset = Dataset::read(path)?;
        if dataset.single_task {
            if let Some(task) = dataset.tasks.first()
                && !task.unsupported.is_empty()
            {
                let task = dataset.tasks.remove(0);
                return Err(unsupported_error(task));
            }
            return Ok(dataset);
        }
        let (runnable, refused): (Vec<Task>, Vec<Task>) = std::mem::take(&mut dataset.tasks)
            .into_iter()
            .partition(|t| t.unsupported.is_empty());
        dataset.tasks = runnable;
        dataset
            .skipped
            .extend(refused.into_iter().map(unsupported_error));
        Ok(dataset)
    }

    /// Reads `path` as Harbor would: like [`Dataset::load`], but tasks that use features the
    /// runner cannot run stay in `tasks` (with [`Task::unsupported`] set). For tools that only
    /// read tasks, such as submission validation against a dataset.
    pub fn read(path: &Path) -> Result<Dataset, TaskError> {
        let dir = std::path::absolute(path).map_err(|e| TaskError::io(path, e))?;
        if !dir.is_dir() {
            return Err(TaskError::Missing {
                path: dir,
                what: "a task or dataset directory",
            });
        }
        if dir.join("task.toml").is_file() {
            let task = Task::read(&dir)?;
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            return Ok(Dataset {
                dir,
                name,
                tasks: vec![task],
                skipped: Vec::new(),
                files: Vec::new(),
                single_task: true,
            });
        }
        let manifest = read_manifest(&dir)?;
        let manifest_path = dir.join("dataset.toml");
        let name = manifest.dataset.name.clone().unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let mut tasks = Vec::new();
        let mut skipped = Vec::new();
        // Names a malformed task may go by, so a dataset.toml entry for it is not "missing".
        let mut skipped_names = Vec::new();
        let mut subdirs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| TaskError::io(&dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir() && p.join("task.toml").is_file())
            .collect();
        subdirs.sort();
        for sub in subdirs {
            match Task::read(&sub) {
                Ok(task) => tasks.push(task),
                Err(err) => {
                    skipped_names.extend(guessed_names(&sub));
                    skipped.push(err);
                }
            }
        }
        check_unique_names(&tasks)?;
        if !manifest.tasks.is_empty() {
            for entry in &manifest.tasks {
                let known = tasks
                    .iter()
                    .any(|t| t.name == entry.name || t.short_name() == entry.name)
                    || skipped_names.iter().any(|n| n == &entry.name);
                if !known {
                    return Err(TaskError::ListedTaskMissing {
                        manifest: manifest_path,
                        name: entry.name.clone(),
                    });
                }
            }
            let listed: BTreeMap<&str, Option<&str>> = manifest
                .tasks
                .iter()
                .map(|t| (t.name.as_str(), t.digest.as_deref()))
                .collect();
            tasks.retain(|t| {
                listed.contains_key(t.name.as_str()) || listed.contains_key(t.short_name())
            });
            for task in &tasks {
                let pinned = listed
                    .get(task.name.as_str())
                    .or_else(|| listed.get(task.short_name()))
                    .copied()
                    .flatten();
                if let Some(pinned) = pinned
                    && pinned != task.digest
                {
                    tracing::warn!(
                        "{}: task {} is pinned to {pinned} but its content digest is {}; the content was changed",
                        manifest_path.display(),
                        task.name,
                        task.digest
                    );
                }
            }
        }
        let mut files = Vec::new();
        for (i, entry) in manifest.files.iter().enumerate() {
            // A dataset file is the dataset's own: no absolute path, `..` or link out of it.
            let path = crate::confined::contained_file(
                &dir,
                &entry.path,
                &manifest_path,
                &format!("files[{i}].path"),
            )?;
            let bytes = std::fs::read(&path).map_err(|e| TaskError::io(&path, e))?;
            files.push((entry.path.clone(), sha256_hex(&bytes)));
        }
        tasks.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Dataset {
            dir,
            name,
            tasks,
            skipped,
            files,
            single_task: false,
        })
    }

    /// Lets every task's env templates read `host` (the variables the job passes).
    pub fn pass_host_vars(&mut self, host: &crate::template::HostVars) {
        for task in &mut self.tasks {
            task.host_vars = host.clone();
        }
    }

    /// The `source` Harbor 0.26 records for this dataset's trials, which names their eval
    /// key (`agent__model__source`): a local dataset's resolved directory name
    /// (`DatasetConfig._get_local_task_configs`), not `dataset.toml`'s name; `None` for a
    /// single task, which Harbor runs without a dataset (its eval key says `adhoc`).
    pub fn trial_source(&self) -> Option<String> {
        if self.single_task {
            return None;
        }
        let resolved = self.dir.canonicalize().unwrap_or_else(|_| self.dir.clone());
        resolved
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    }

    /// The dataset digest over the tasks that loaded and the dataset files.
    pub fn digest(&self) -> String {
        let digests: Vec<String> = self.tasks.iter().map(|t| t.digest.clone()).collect();
        dataset_digest(&digests, &self.files)
    }

    /// The subdirectories of the dataset directory that hold task directories themselves:
    /// Harbor reads only a dataset's immediate subdirectories, so tasks there are not part of
    /// this dataset, but each such folder is one (for a hint when this one has no task).
    pub fn nested_datasets(&self) -> Vec<PathBuf> {
        if self.single_task {
            return Vec::new();
        }
        let children = |dir: &Path| -> Vec<PathBuf> {
            let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
            found.sort();
            found
        };
        children(&self.dir)
            .into_iter()
            .filter(|sub| {
                !sub.join("task.toml").is_file()
                    && children(sub).iter().any(|p| p.join("task.toml").is_file())
            })
            .collect()
    }

    /// Finds a task by full name or short name.
    pub fn task(&self, name: &str) -> Option<&Task> {
        self.tasks
            .iter()
            .find(|t| t.name == name || t.short_name() == name)
    }
}

fn unsupported_error(task: Task) -> TaskError {
    TaskError::Unsupported {
        task: task.name,
        dir: task.dir,
        features: task.unsupported,
    }
}

/// Refuses two tasks with one name: they would share one image and their trials one name.
fn check_unique_names(tasks: &[Task]) -> Result<(), TaskError> {
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for task in tasks {
        if let Some(first) = seen.insert(&task.name, &task.dir) {
            return Err(TaskError::DuplicateTaskName {
                name: task.name.clone(),
                first: first.to_path_buf(),
                second: task.dir.clone(),
            });
        }
    }
    Ok(())
}

/// The names a task directory that did not load may have: its directory name, and its
/// `[task].name` when the TOML parses that far.
fn guessed_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .into_iter()
        .collect();
    let declared = std::fs::read_to_string(dir.join("task.toml"))
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .and_then(|table| table.get("task")?.get("name")?.as_str().map(str::to_owned));
    if let Some(name) = declared {
        names.push(name.rsplit('/').next().unwrap_or(&name).to_owned());
        names.push(name);
    }
    names
}

fn read_manifest(dir: &Path) -> Result<DatasetToml, TaskError> {
    let path = dir.join("dataset.toml");
    if !path.is_file() {
        return Ok(DatasetToml::default());
    }
    crate::confined::contained_file(dir, "dataset.toml", &path, "(dataset.toml)")?;
    let text = std::fs::read_to_string(&path).map_err(|e| TaskError::io(&path, e))?;
    toml::from_str(&text)
        .map_err(|e| TaskError::invalid(&path, "(dataset.toml)", e.message().trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_files::write_files;

    /// A temp dir of minimal tasks, one per `(dir, task.toml)`.
    fn tasks_dir(tasks: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, toml) in tasks {
            task(dir.path(), name, toml);
        }
        dir
    }

    /// A minimal task in `root/dir` with this `task.toml`.
    fn task(root: &Path, dir: &str, toml: &str) {
        write_files(
            &root.join(dir),
            &[
                ("task.toml", toml),
                ("instruction.md", "Do it.\n"),
                ("environment/Dockerfile", "FROM scratch\n"),
                ("tests/test.sh", "#!/bin/bash\n"),
            ],
        );
    }

    #[test]
    fn malformed_task_is_skipped_and_named() {
        let dir = tasks_dir(&[
            ("good", ""),
            ("bad", "[verifier]\ntimeout_sec = \"never\"\n"),
        ]);
        let ds = Dataset::load(dir.path()).unwrap();
        assert_eq!(ds.tasks.len(), 1);
        assert_eq!(ds.tasks[0].name, "good");
        assert_eq!(ds.skipped.len(), 1);
        let msg = ds.skipped[0].to_string();
        assert!(
            msg.contains("bad/task.toml") && msg.contains("verifier.timeout_sec"),
            "{msg}"
        );
    }

    #[test]
    fn dataset_toml_names_and_selects_tasks() {
        let dir = tasks_dir(&[("one", "[task]\nname = \"org/one\"\n"), ("two", "")]);
        std::fs::write(dir.path().join("metric.py"), "print(1)\n").unwrap();
        std::fs::write(
            dir.path().join("dataset.toml"),
            "[dataset]\nname = \"org/set\"\n[[tasks]]\nname = \"org/one\"\n[[files]]\npath = \"metric.py\"\n",
        )
        .unwrap();
        let ds = Dataset::load(dir.path()).unwrap();
        assert_eq!(ds.name, "org/set");
        assert_eq!(
            ds.tasks.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["org/one"]
        );
        assert_eq!(ds.files.len(), 1);
        assert_eq!(
            ds.digest(),
            dataset_digest(&[ds.tasks[0].digest.clone()], &ds.files)
        );
    }

    #[test]
    fn tasks_two_levels_down_are_not_the_datasets_but_are_named() {
        let dir = tasks_dir(&[("group/one", ""), ("group/two", "")]);
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        let ds = Dataset::read(dir.path()).unwrap();
        assert!(ds.tasks.is_empty() && ds.skipped.is_empty());
        assert_eq!(ds.nested_datasets(), [dir.path().join("group")]);
        let group = Dataset::read(&dir.path().join("group")).unwrap();
        assert_eq!(group.tasks.len(), 2);
        assert!(group.nested_datasets().is_empty());
    }

    #[test]
    fn a_task_dir_is_a_dataset_of_one() {
        let dir = tasks_dir(&[("solo", "")]);
        let ds = Dataset::load(&dir.path().join("solo")).unwrap();
        assert!(ds.single_task);
        assert_eq!(ds.tasks.len(), 1);
    }

    #[test]
    fn duplicate_task_names_are_an_error_naming_both_dirs() {
        let dir = tasks_dir(&[
            ("a", "[task]\nname = \"org/same\"\n"),
            ("b", "[task]\nname = \"org/same\"\n"),
            ("c", ""),
        ]);
        let err = Dataset::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("org/same"), "{err}");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        assert!(
            err.contains(&a.display().to_string()) && err.contains(&b.display().to_string()),
            "{err}"
        );
        // A directory name equal to another task's [task].name is a duplicate too.
        let dir = tasks_dir(&[("x", ""), ("y", "[task]\nname = \"org/x\"\n")]);
        assert!(Dataset::load(dir.path()).is_ok(), "org/x and x differ");
    }

    #[test]
    fn a_dataset_toml_entry_without_a_task_is_an_error() {
        let dir = tasks_dir(&[("one", "[task]\nname = \"org/one\"\n")]);
        std::fs::write(
            dir.path().join("dataset.toml"),
            "[[tasks]]\nname = \"org/one\"\n[[tasks]]\nname = \"org/gone\"\n",
        )
        .unwrap();
        let err = Dataset::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("dataset.toml") && err.contains("\"org/gone\""),
            "{err}"
        );
    }

    #[test]
    fn a_listed_task_that_fails_to_load_is_skipped_not_missing() {
        let dir = tasks_dir(&[
            ("one", ""),
            (
                "bad",
                "[task]\nname = \"org/bad\"\n[verifier]\ntimeout_sec = \"x\"\n",
            ),
        ]);
        std::fs::write(
            dir.path().join("dataset.toml"),
            "[[tasks]]\nname = \"one\"\n[[tasks]]\nname = \"org/bad\"\n",
        )
        .unwrap();
        let ds = Dataset::load(dir.path()).unwrap();
        assert_eq!(ds.tasks.len(), 1);
        assert_eq!(ds.skipped.len(), 1);
    }

    #[test]
    fn unsupported_tasks_are_skipped_by_load_and_kept_by_read() {
        let dir = tasks_dir(&[
            ("good", ""),
            (
                "tpu",
                "[environment.tpu]\ntype = \"v6e\"\ntopology = \"2x4\"\n",
            ),
            (
                "multi",
                "[environment.tpu]\ntype = \"v6e\"\ntopology = \"2x4\"\n",
            ),
        ]);

        let ds = Dataset::load(dir.path()).unwrap();
        assert_eq!(
            ds.tasks.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["good"]
        );
        let messages: Vec<String> = ds.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages.iter().any(|m| m.starts_with("task tpu (")
                && m.ends_with("TPUs ([environment.tpu]) are not supported yet")),
            "{messages:?}"
        );
        assert!(
            messages.iter().any(|m| m.starts_with("task multi (")
                && m.ends_with("TPUs ([environment.tpu]) are not supported yet")),
            "{messages:?}"
        );

        let read = Dataset::read(dir.path()).unwrap();
        assert_eq!(read.tasks.len(), 3);
        assert!(read.skipped.is_empty());
        let multi = read.task("multi").unwrap();
        assert_eq!(multi.unsupported[0].key(), "tpu");

        let err = Dataset::load(&dir.path().join("multi")).unwrap_err();
        assert!(matches!(err, TaskError::Unsupported { .. }), "{err}");
        assert!(Dataset::read(&dir.path().join("multi")).is_ok());
    }
}
