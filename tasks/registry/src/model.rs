//! `registry.json`, Harbor 0.26's JSON registry (`harbor/models/registry.py`): a list of
//! datasets, each `name`, `version`, `description`, `tasks` of `{name, git_url, git_commit_id,
//! path}` and optional `metrics`. Parsed field by field so a malformed registry is named by
//! its file and the field at fault.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::RegistryError;

/// One task of a dataset as the registry pins it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryTask {
    /// The task's name in the dataset.
    pub name: String,
    /// The repository holding it; `None` is a task on this machine (`path` alone).
    #[serde(default)]
    pub git_url: Option<String>,
    /// The commit it is pinned at; `None` takes the repository's default branch head.
    #[serde(default)]
    pub git_commit_id: Option<String>,
    /// The task's directory inside the repository.
    pub path: String,
}

/// One dataset version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSpec {
    /// Its name (`terminal-bench`).
    pub name: String,
    /// Its version (`2.0`, `head`).
    pub version: String,
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// Its tasks.
    pub tasks: Vec<RegistryTask>,
    /// Harbor's metric configs, kept as given.
    #[serde(default)]
    pub metrics: Vec<serde_json::Value>,
}

/// A parsed registry: its datasets in file order, and where it was read from.
#[derive(Debug, Clone)]
pub struct Registry {
    /// Where it came from (a URL or a file), for messages.
    pub origin: String,
    /// Its datasets.
    pub datasets: Vec<DatasetSpec>,
}

impl Registry {
    /// Parses `text` (read from `origin`). A dataset version listed twice is kept once when
    /// both entries agree and refused when they differ: which one ran would be a guess.
    pub fn parse(origin: &str, text: &str) -> Result<Registry, RegistryError> {
        let malformed = |field: String, problem: String| RegistryError::Malformed {
            origin: origin.to_owned(),
            field,
            problem,
        };
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| malformed("(the document)".into(), format!("not JSON: {e}")))?;
        let rows = value.as_array().ok_or_else(|| {
            malformed(
                "(the document)".into(),
                "expected a list of datasets".into(),
            )
        })?;
        let mut datasets: Vec<DatasetSpec> = Vec::with_capacity(rows.len());
        let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (i, row) in rows.iter().enumerate() {
            let spec = parse_row(row).map_err(|(field, problem)| {
                malformed(
                    if field.is_empty() {
                        format!("[{i}]")
                    } else {
                        format!("[{i}].{field}")
                    },
                    problem,
                )
            })?;
            let key = (spec.name.clone(), spec.version.clone());
            if let Some(&first) = seen.get(&key) {
                if datasets[first] != spec {
                    return Err(RegistryError::Conflict {
                        origin: origin.to_owned(),
                        dataset: format!("{}@{}", spec.name, spec.version),
                        first,
                        second: i,
                    });
                }
                continue;
            }
            seen.insert(key, datasets.len());
            datasets.push(spec);
        }
        Ok(Registry {
            origin: origin.to_owned(),
            datasets,
        })
    }

    /// The versions of dataset `name`, in file order (empty: no such dataset).
    pub fn versions(&self, name: &str) -> Vec<&str> {
        self.datasets
            .iter()
            .filter(|d| d.name == name)
            .map(|d| d.version.as_str())
            .collect()
    }

    /// Every dataset name, sorted, once.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.datasets.iter().map(|d| d.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// One row, with the field at fault (relative to the row) and the problem.
fn parse_row(row: &serde_json::Value) -> Result<DatasetSpec, (String, String)> {
    let object = row
        .as_object()
        .ok_or_else(|| (String::new(), "expected an object".to_owned()))?;
    let text = |field: &str, required: bool| -> Result<Option<String>, (String, String)> {
        match object.get(field) {
            None | Some(serde_json::Value::Null) if !required => Ok(None),
            None | Some(serde_json::Value::Null) => Err((field.to_owned(), "missing".to_owned())),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            // Harbor's pydantic model would not coerce a number either: `version: 2.0` is
            // refused, with the fix.
            Some(other) => Err((
                field.to_owned(),
                format!("expected a string, found {other} (quote it)"),
            )),
        }
    };
    let name = text("name", true)?.unwrap_or_default();
    let version = text("version", true)?.unwrap_or_default();
    let description = text("description", false)?.unwrap_or_default();
    if name.is_empty() {
        return Err(("name".into(), "is empty".into()));
    }
    let tasks = object
        .get("tasks")
        .ok_or_else(|| ("tasks".to_owned(), "missing".to_owned()))?
        .as_array()
        .ok_or_else(|| ("tasks".to_owned(), "expected a list".to_owned()))?;
    let tasks = tasks
        .iter()
        .enumerate()
        .map(|(j, task)| {
            let task: RegistryTask = serde_json::from_value(task.clone())
                .map_err(|e| (format!("tasks[{j}]"), e.to_string()))?;
            check_task(&task).map_err(|problem| (format!("tasks[{j}]"), problem))?;
            Ok(task)
        })
        .collect::<Result<Vec<_>, (String, String)>>()?;
    let metrics = match object.get("metrics") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(list)) => list.clone(),
        Some(_) => return Err(("metrics".into(), "expected a list".into())),
    };
    Ok(DatasetSpec {
        name,
        version,
        description,
        tasks,
        metrics,
    })
}

/// A task's fields that would otherwise fail late, or escape the repository.
fn check_task(task: &RegistryTask) -> Result<(), String> {
    if task.name.is_empty() {
        return Err("name is empty".into());
    }
    let path = std::path::Path::new(&task.path);
    if task.git_url.is_some()
        && (task.path.is_empty()
            || path.is_absolute()
            || path
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_))))
    {
        return Err(format!(
            "path {:?} is not a relative path inside the repository",
            task.path
        ));
    }
    if let Some(commit) = &task.git_commit_id
        && (!matches!(commit.len(), 40 | 64) || !commit.chars().all(|c| c.is_ascii_hexdigit()))
    {
        // git fetches a commit by its full id only: an abbreviation would need the whole
        // history to expand.
        return Err(format!(
            "git_commit_id {commit:?} is not a full commit id (40 or 64 hexadecimal digits)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW: &str = r#"{"name":"tb","version":"2.0","description":"d","tasks":[
        {"name":"a","git_url":"file:///r","git_commit_id":"0123456789abcdef0123456789abcdef01234567","path":"tasks/a"}]}"#;

    #[test]
    fn a_registry_reads_as_harbor_writes_it() {
        let r = Registry::parse("r.json", &format!("[{ROW}]")).unwrap();
        assert_eq!(r.datasets.len(), 1);
        assert_eq!(r.datasets[0].tasks[0].path, "tasks/a");
        assert_eq!(r.versions("tb"), ["2.0"]);
    }

    #[test]
    fn a_malformed_registry_names_its_file_and_field() {
        let err = Registry::parse("r.json", r#"[{"name":"tb","version":2.0,"tasks":[]}]"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("r.json") && err.contains("[0].version"),
            "{err}"
        );
        let err = Registry::parse(
            "r.json",
            r#"[{"name":"tb","version":"1","tasks":[{"name":"a","git_url":"u","path":"../x"}]}]"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("[0].tasks[0]") && err.contains("../x"),
            "{err}"
        );
        let err = Registry::parse("r.json", "{}").unwrap_err().to_string();
        assert!(err.contains("list of datasets"), "{err}");
    }

    #[test]
    fn one_version_defined_twice_differently_is_refused_and_identically_kept_once() {
        let same = Registry::parse("r.json", &format!("[{ROW},{ROW}]")).unwrap();
        assert_eq!(same.datasets.len(), 1);
        let other = ROW.replace("tasks/a", "tasks/b");
        let err = Registry::parse("r.json", &format!("[{ROW},{other}]"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tb@2.0") && err.contains("[0]") && err.contains("[1]"),
            "{err}"
        );
    }
}
