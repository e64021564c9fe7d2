//! Bringing a dataset's tasks into the cache: grouped by repository and commit, so the tasks
//! of one repository at one commit come in one fetch; each cached task verified first (see
//! [`crate::cache`]); a task pinned to no commit takes its repository's head, resolved once
//! per repository, and the commit it got is what is recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cache::Cache;
use crate::copy::copy_tree;
use crate::digest::tree_digest;
use crate::error::RegistryError;
use crate::git::{self, redact};
use crate::model::RegistryTask;

/// A task ready to run: where it is on this machine and what pins it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTask {
    /// Its name in the dataset.
    pub name: String,
    /// Its repository (credentials removed); `None` for a local task.
    pub git_url: Option<String>,
    /// The commit it was fetched at (the resolved head when the registry pins none).
    pub git_commit_id: Option<String>,
    /// Its path in the repository (or on this machine, for a local task).
    pub path: String,
    /// The task directory to run.
    pub dir: PathBuf,
    /// The content digest of `dir` as fetched (see [`crate::digest`]).
    pub content_digest: String,
}

/// Resolves every task of `tasks`, in their order, fetching what the cache lacks.
pub fn fetch_all(
    tasks: &[RegistryTask],
    cache: &Cache,
    note: &mut dyn FnMut(String),
) -> Result<Vec<ResolvedTask>, RegistryError> {
    let mut heads: BTreeMap<&str, String> = BTreeMap::new();
    let mut groups: BTreeMap<(&str, String), Vec<usize>> = BTreeMap::new();
    let mut out: Vec<Option<ResolvedTask>> = vec![None; tasks.len()];
    for (i, task) in tasks.iter().enumerate() {
        let Some(url) = task.git_url.as_deref() else {
            out[i] = Some(local_task(task)?);
            continue;
        };
        let commit = match &task.git_commit_id {
            Some(c) => c.to_ascii_lowercase(),
            None => match heads.get(url) {
                Some(c) => c.clone(),
                None => {
                    let c = git::head_commit(url)?;
                    heads.insert(url, c.clone());
                    c
                }
            },
        };
        groups.entry((url, commit)).or_default().push(i);
    }
    for ((url, commit), members) in &groups {
        let group: Vec<&RegistryTask> = members.iter().map(|&i| &tasks[i]).collect();
        let resolved = fetch_group(url, commit, &group, cache, note)?;
        for (&i, task) in members.iter().zip(resolved) {
            out[i] = Some(task);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// A registry task without a repository: Harbor's `LocalTaskId`, a directory on this machine.
fn local_task(task: &RegistryTask) -> Result<ResolvedTask, RegistryError> {
    let dir = std::path::absolute(&task.path).unwrap_or_else(|_| PathBuf::from(&task.path));
    if !dir.is_dir() {
        return Err(RegistryError::LocalPath {
            task: task.name.clone(),
            path: task.path.clone(),
        });
    }
    Ok(ResolvedTask {
        name: task.name.clone(),
        git_url: None,
        git_commit_id: None,
        path: task.path.clone(),
        content_digest: tree_digest(&dir).map_err(RegistryError::io(&dir))?,
        dir,
    })
}

/// The tasks of `url` at `commit`: verified cache entries, and one fetch for the rest.
fn fetch_group(
    url: &str,
    commit: &str,
    group: &[&RegistryTask],
    cache: &Cache,
    note: &mut dyn FnMut(String),
) -> Result<Vec<ResolvedTask>, RegistryError> {
    let _lock = cache.lock_repo(url)?;
    let mut missing: Vec<usize> = Vec::new();
    let mut changed: BTreeMap<usize, String> = BTreeMap::new();
    for (i, task) in group.iter().enumerate() {
        let entry = cache.entry(url, commit, &task.path);
        match verify(&entry) {
            Verdict::Good(_) => {}
            Verdict::Absent => missing.push(i),
            Verdict::Changed(detail) => {
                note(format!(
                    "task {}: the cached copy in {} changed since it was fetched ({detail}); fetching it again",
                    task.name,
                    entry.display()
                ));
                cache.discard(&entry)?;
                changed.insert(i, detail);
                missing.push(i);
            }
        }
    }
    if !missing.is_empty() {
        note(format!(
            "fetching {} task(s) from {} at {}",
            missing.len(),
            redact(url),
            short(commit)
        ));
        let wanted: Vec<&RegistryTask> = missing.iter().map(|&i| group[i]).collect();
        if let Err(err) = store(url, commit, &wanted, cache) {
            // A task found edited and not fetched again is refused by name, never run.
            if let Some((&i, detail)) = changed.iter().next() {
                return Err(RegistryError::Tampered {
                    task: group[i].name.clone(),
                    dir: cache.entry(url, commit, &group[i].path),
                    detail: detail.clone(),
                    fetch: err.to_string(),
                });
            }
            return Err(err);
        }
    }
    group
        .iter()
        .map(|task| {
            let entry = cache.entry(url, commit, &task.path);
            match verify(&entry) {
                Verdict::Good(digest) => Ok(ResolvedTask {
                    name: task.name.clone(),
                    git_url: Some(redact(url)),
                    git_commit_id: Some(commit.to_owned()),
                    path: task.path.clone(),
                    dir: entry.join("task"),
                    content_digest: digest,
                }),
                Verdict::Absent | Verdict::Changed(_) => Err(RegistryError::Tampered {
                    task: task.name.clone(),
                    dir: entry.clone(),
                    detail: "changed while it was being fetched".into(),
                    fetch: "another process is writing the cache".into(),
                }),
            }
        })
        .collect()
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// A cache entry's state.
enum Verdict {
    Good(String),
    Absent,
    Changed(String),
}

fn verify(entry: &Path) -> Verdict {
    let Ok(recorded) = std::fs::read_to_string(entry.join("digest")) else {
        return if entry.exists() {
            Verdict::Changed("its digest file is missing".into())
        } else {
            Verdict::Absent
        };
    };
    let recorded = recorded.trim().to_owned();
    match tree_digest(&entry.join("task")) {
        Ok(now) if now == recorded => Verdict::Good(now),
        Ok(now) => Verdict::Changed(format!("content digest {now}, fetched as {recorded}")),
        Err(e) => Verdict::Changed(format!("cannot read it: {e}")),
    }
}

/// Fetches `tasks` of `url` at `commit` and renames each finished entry into the cache.
fn store(
    url: &str,
    commit: &str,
    tasks: &[&RegistryTask],
    cache: &Cache,
) -> Result<(), RegistryError> {
    let stage = cache.staging()?;
    let repo = stage.path().join("repo");
    let paths: Vec<(&str, &str)> = tasks
        .iter()
        .map(|t| (t.name.as_str(), t.path.as_str()))
        .collect();
    git::checkout(url, commit, &paths, &repo)?;
    for (i, task) in tasks.iter().enumerate() {
        let staged = stage.path().join(format!("entry-{i}"));
        std::fs::create_dir(&staged).map_err(RegistryError::io(&staged))?;
        let tree = staged.join("task");
        copy_tree(&repo.join(&task.path), &tree).map_err(RegistryError::io(&tree))?;
        let digest = tree_digest(&tree).map_err(RegistryError::io(&tree))?;
        let file = staged.join("digest");
        std::fs::write(&file, format!("{digest}\n")).map_err(RegistryError::io(&file))?;
        let entry = cache.entry(url, commit, &task.path);
        let parent = entry.parent().unwrap_or(cache.root.as_path());
        std::fs::create_dir_all(parent).map_err(RegistryError::io(parent))?;
        std::fs::rename(&staged, &entry).map_err(RegistryError::io(&entry))?;
    }
    Ok(())
}
