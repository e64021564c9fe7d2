//! A published dataset manifest: Harbor 0.26's `dataset.toml` (`DatasetManifest`), the form
//! TB 2.1 publishes: `[dataset]` with `name` (and `version`), and one `[[tasks]]` entry per
//! task with its `name` (`org/name`) and `digest` (`sha256:<64 hex>`), the task's content
//! digest. The one reader of manifests: `validate-submission --dataset` and
//! `tasks digest --check` both read through it, and both compare through [`compare`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest manifest read: TB 2.1's 89 tasks take about 10 KB.
const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// A manifest that cannot be used, naming the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("{path}: cannot read the dataset manifest: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not a manifest of Harbor's shape.
    #[error("{path}: not a dataset manifest (Harbor's dataset.toml): {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the field.
        problem: String,
    },
}

#[derive(Deserialize)]
struct ManifestToml {
    dataset: Option<DatasetInfo>,
    #[serde(default)]
    tasks: Vec<TaskRef>,
}

#[derive(Deserialize)]
struct DatasetInfo {
    name: Option<String>,
    version: Option<String>,
}

#[derive(Deserialize)]
struct TaskRef {
    name: String,
    digest: Option<String>,
}

/// A read manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// `[dataset].name`.
    pub name: Option<String>,
    /// `[dataset].version`.
    pub version: Option<String>,
    /// Every task's name and digest (`sha256:<hex>`, lowercase).
    pub digests: BTreeMap<String, String>,
}

impl Manifest {
    /// Reads and checks `path`: every task has a name and a `sha256:<64 hex>` digest, and no
    /// name is listed twice (a manifest whose tasks carry no digests is a dataset's own
    /// `dataset.toml`, which pins nothing, so it is refused here).
    pub fn read(path: &Path) -> Result<Manifest, ManifestError> {
        let bytes = tasks::bounded::read_capped(path, MAX_MANIFEST_BYTES, "dataset manifest")
            .map_err(|source| ManifestError::Io {
                path: path.to_owned(),
                source,
            })?;
        let invalid = |problem: String| ManifestError::Invalid {
            path: path.to_owned(),
            problem,
        };
        let text = String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))?;
        Manifest::parse(&text).map_err(invalid)
    }

    /// Parses manifest text; the error says which field is wrong.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let doc: ManifestToml = toml::from_str(text).map_err(|e| e.message().trim().to_owned())?;
        if doc.tasks.is_empty() {
            return Err("it lists no [[tasks]]".into());
        }
        let mut digests = BTreeMap::new();
        for (i, task) in doc.tasks.iter().enumerate() {
            let Some(digest) = &task.digest else {
                return Err(format!(
                    "tasks[{i}] ({}) has no digest; a published manifest pins every task as sha256:<64 hex>",
                    task.name
                ));
            };
            let digest = digest.trim().to_ascii_lowercase();
            let hex = digest.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "tasks[{i}].digest of {} is {digest:?}, not sha256:<64 hex>",
                    task.name
                ));
            }
            if digests.insert(task.name.clone(), digest).is_some() {
                return Err(format!("task {} is listed twice", task.name));
            }
        }
        Ok(Manifest {
            name: doc.dataset.as_ref().and_then(|d| d.name.clone()),
            version: doc.dataset.and_then(|d| d.version),
            digests,
        })
    }
}

/// True when `path` names a manifest file rather than a dataset (or task) directory.
pub fn is_manifest(path: &Path) -> bool {
    path.is_file()
}

/// How a local dataset differs from a manifest.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Differences {
    /// Manifest tasks the local dataset lacks.
    pub missing: Vec<String>,
    /// `(task, manifest digest, local digest)` of tasks whose content differs.
    pub changed: Vec<(String, String, String)>,
    /// Local tasks the manifest does not list.
    pub extra: Vec<String>,
}

impl Differences {
    /// True when the local dataset is the manifest's.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.changed.is_empty() && self.extra.is_empty()
    }
}

/// Compares local task digests (name → digest) with a manifest's, names matched whole or by
/// their part after `/` when that is unambiguous (a local folder `regex-log` against
/// `terminal-bench/regex-log`).
pub fn compare(manifest: &Manifest, local: &BTreeMap<String, String>) -> Differences {
    let tasks = super::coverage::DatasetTasks {
        digests: manifest.digests.clone(),
    };
    let mut out = Differences::default();
    let mut seen = std::collections::BTreeSet::new();
    for (name, digest) in local {
        let Some(listed) = tasks.resolve(name) else {
            out.extra.push(name.clone());
            continue;
        };
        seen.insert(listed.to_owned());
        let want = &manifest.digests[listed];
        if super::coverage::normalise(want) != super::coverage::normalise(digest) {
            out.changed
                .push((listed.to_owned(), want.clone(), digest.clone()));
        }
    }
    out.missing = manifest
        .digests
        .keys()
        .filter(|k| !seen.contains(*k))
        .cloned()
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn manifest() -> Manifest {
        Manifest::parse(&format!(
            "# a header\n[dataset]\nname = \"terminal-bench/terminal-bench-2-1\"\nversion = \"2.1\"\n\n\
             [[tasks]]\nname = \"terminal-bench/regex-log\"\ndigest = \"{A}\"\n\n\
             [[tasks]]\nname = \"terminal-bench/fix-git\"\ndigest = \"{B}\"\n\n\
             [[files]]\npath = \"metric.py\"\ndigest = \"{A}\"\n"
        ))
        .unwrap()
    }

    #[test]
    fn harbors_manifest_shape_is_read() {
        let m = manifest();
        assert_eq!(m.name.as_deref(), Some("terminal-bench/terminal-bench-2-1"));
        assert_eq!(m.version.as_deref(), Some("2.1"));
        assert_eq!(m.digests["terminal-bench/fix-git"], B);
    }

    #[test]
    fn a_manifest_must_pin_every_task() {
        let err = Manifest::parse("[[tasks]]\nname = \"o/t\"\n").unwrap_err();
        assert!(err.contains("tasks[0] (o/t) has no digest"), "{err}");
        let err =
            Manifest::parse("[[tasks]]\nname = \"o/t\"\ndigest = \"sha256:12\"\n").unwrap_err();
        assert!(err.contains("not sha256:<64 hex>"), "{err}");
        let err = Manifest::parse("[dataset]\nname = \"o/d\"\n").unwrap_err();
        assert!(err.contains("lists no [[tasks]]"), "{err}");
        let twice = format!("[[tasks]]\nname = \"o/t\"\ndigest = \"{A}\"\n").repeat(2);
        assert!(
            Manifest::parse(&twice)
                .unwrap_err()
                .contains("listed twice")
        );
    }

    #[test]
    fn compare_names_missing_changed_and_extra_tasks() {
        let local = BTreeMap::from([
            ("regex-log".to_owned(), A.to_owned()),
            ("terminal-bench/extra".to_owned(), A.to_owned()),
        ]);
        let d = compare(&manifest(), &local);
        assert_eq!(d.missing, ["terminal-bench/fix-git"]);
        assert!(d.changed.is_empty());
        assert_eq!(d.extra, ["terminal-bench/extra"]);
        let local = BTreeMap::from([
            ("regex-log".to_owned(), B.to_owned()),
            ("fix-git".to_owned(), B.to_owned()),
        ]);
        let d = compare(&manifest(), &local);
        assert_eq!(
            d.changed,
            [(
                "terminal-bench/regex-log".to_owned(),
                A.to_owned(),
                B.to_owned()
            )]
        );
        assert!(!d.is_empty());
    }
}
