//! A resolved dataset as the plain dataset directory the rest of the runner reads: a
//! `dataset.toml` naming it and one link per task to its verified cache entry. Views are
//! content-addressed (the key covers the dataset and every task's entry), made in staging and
//! renamed into place, so concurrent runs share them and none sees one half-made.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::cache::Cache;
use crate::error::RegistryError;
use crate::fetch::ResolvedTask;

/// The directory name of each task in a view or a download: its dataset name made a safe
/// file name, unique within the dataset.
pub fn dir_names(tasks: &[ResolvedTask]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    tasks
        .iter()
        .map(|t| {
            let mut name = safe_name(&t.name, "task");
            let mut n = 2;
            while !seen.insert(name.clone()) {
                name = format!("{}-{n}", name.trim_end_matches(char::is_numeric));
                n += 1;
            }
            name
        })
        .collect()
}

/// `text` as one safe file name: every character but ASCII letters, digits, `-`, `_` and `.`
/// made `_`, no leading dot; `fallback` when nothing is left.
fn safe_name(text: &str, fallback: &str) -> String {
    let safe: String = text.chars().map(crate::cache::file_name_char).collect();
    let safe = safe.trim_start_matches('.');
    if safe.is_empty() {
        fallback.to_owned()
    } else {
        safe.to_owned()
    }
}

/// Writes the `dataset.toml` naming the dataset `name` into `dir`.
fn write_manifest(dir: &Path, name: &str) -> Result<(), RegistryError> {
    let manifest = dir.join("dataset.toml");
    let toml = format!("[dataset]\nname = {}\n", serde_json::Value::from(name));
    std::fs::write(&manifest, toml).map_err(RegistryError::io(&manifest))
}

/// The view of dataset `name@version` made of `tasks`.
pub fn make(
    cache: &Cache,
    name: &str,
    version: &str,
    tasks: &[ResolvedTask],
) -> Result<PathBuf, RegistryError> {
    let names = dir_names(tasks);
    let mut hash = Sha256::new();
    hash.update(format!("{name}\0{version}\n").as_bytes());
    for (dir_name, task) in names.iter().zip(tasks) {
        hash.update(format!("{dir_name}\0{}\n", task.dir.display()).as_bytes());
    }
    let key = hex::encode(hash.finalize())[..24].to_owned();
    // The view's own name is the dataset's: Harbor's trials record a registry dataset's name
    // as their `source` (and so in their eval key), and a dataset directory's `source` is its
    // name.
    let safe = safe_name(name, "dataset");
    let views = cache.views();
    let outer = views.join(&key);
    let view = outer.join(&safe);
    if is_intact(&view, &names, tasks) {
        return Ok(view);
    }
    std::fs::create_dir_all(&views).map_err(RegistryError::io(&views))?;
    let stage = cache.staging()?;
    let staged_outer = stage.path().join("view");
    let staged = staged_outer.join(&safe);
    std::fs::create_dir_all(&staged).map_err(RegistryError::io(&staged))?;
    write_manifest(&staged, name)?;
    for (dir_name, task) in names.iter().zip(tasks) {
        let link = staged.join(dir_name);
        std::os::unix::fs::symlink(&task.dir, &link).map_err(RegistryError::io(&link))?;
    }
    if outer.exists() {
        // Not intact (someone edited it): set aside, then replaced.
        cache.discard(&outer)?;
    }
    if let Err(e) = std::fs::rename(&staged_outer, &outer) {
        // Another run made the same view meanwhile: use it if it is whole.
        if !is_intact(&view, &names, tasks) {
            return Err(RegistryError::Io {
                path: outer,
                source: e,
            });
        }
    }
    Ok(view)
}

/// Whether `view` holds exactly the manifest and the expected links.
fn is_intact(view: &Path, names: &[String], tasks: &[ResolvedTask]) -> bool {
    let Ok(entries) = std::fs::read_dir(view) else {
        return false;
    };
    let count = entries.count();
    count == names.len() + 1
        && view.join("dataset.toml").is_file()
        && names
            .iter()
            .zip(tasks)
            .all(|(n, t)| std::fs::read_link(view.join(n)).is_ok_and(|target| target == t.dir))
}

/// Copies `tasks` into the new directory `out` as a plain dataset folder (`runner datasets
/// download`): staged beside it and renamed, so `out` appears whole or not at all.
pub fn download(name: &str, tasks: &[ResolvedTask], out: &Path) -> Result<(), RegistryError> {
    if out.exists() {
        return Err(RegistryError::Io {
            path: out.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "already exists; choose a new directory with -o",
            ),
        });
    }
    let parent = std::path::absolute(out)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&parent).map_err(RegistryError::io(&parent))?;
    let stage = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(&parent)
        .map_err(RegistryError::io(&parent))?;
    let staged = stage.path().join("dataset");
    std::fs::create_dir(&staged).map_err(RegistryError::io(&staged))?;
    write_manifest(&staged, name)?;
    for (dir_name, task) in dir_names(tasks).iter().zip(tasks) {
        let to = staged.join(dir_name);
        crate::copy::copy_tree(&task.dir, &to).map_err(RegistryError::io(&to))?;
    }
    std::fs::rename(&staged, out).map_err(RegistryError::io(out))
}
