//! A task's identity in records, decided in one place.
//!
//! Harbor allows exactly one of `path` and `name` on a task reference. A task named `org/name`
//! is a package task: it is recorded by name and content digest, which is what leaderboards
//! check. Any other task is a local task, recorded by its directory.

use serde_json::{Value, json};

use crate::Task;
use crate::records::TaskRef;

/// How a task is identified in trial configs and results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskId {
    /// Harbor's `PackageTaskId`: an `org/name` task at a content digest.
    Package {
        /// The organisation part of the name.
        org: String,
        /// The name after the organisation.
        name: String,
        /// `sha256:<content digest>`.
        digest: String,
    },
    /// Harbor's `LocalTaskId`: a task directory.
    Local {
        /// The absolute task directory.
        path: String,
    },
}

impl TaskId {
    /// The identity of `task`.
    pub fn of(task: &Task) -> TaskId {
        match task.name.split_once('/') {
            Some((org, name)) => TaskId::Package {
                org: org.to_owned(),
                name: name.to_owned(),
                digest: task.digest.clone(),
            },
            None => TaskId::Local {
                path: task.dir.display().to_string(),
            },
        }
    }

    /// The `task_id` object of a trial result.
    pub fn to_json(&self) -> Value {
        match self {
            TaskId::Package { org, name, digest } => {
                json!({ "org": org, "name": name, "ref": digest })
            }
            TaskId::Local { path } => json!({ "path": path }),
        }
    }

    /// The `task` reference of a trial config, with the dataset it came from.
    pub fn task_ref(&self, source: Option<String>) -> TaskRef {
        match self {
            TaskId::Package { org, name, digest } => TaskRef {
                name: Some(format!("{org}/{name}")),
                reference: Some(digest.clone()),
                source,
                ..TaskRef::default()
            },
            TaskId::Local { path } => TaskRef {
                path: Some(path.clone()),
                source,
                ..TaskRef::default()
            },
        }
    }
}
