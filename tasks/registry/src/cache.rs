//! The dataset cache: `<cache>/datasets/<repository>/<commit>/<path>/` holds one fetched task
//! (`task/`) and the content digest it had when fetched (`digest`). The cache is verified,
//! not trusted: every use recomputes the digest (see [`crate::digest`]), and an entry that no
//! longer matches is fetched again or refused by name.
//!
//! Entries appear whole or not at all: a fetch stages under `<cache>/datasets/.tmp/` (the same
//! file system) and renames the finished entry into place. Runs sharing the cache take an
//! exclusive lock per repository (`<repository>.lock`, `flock`, dropped by the kernel when a
//! process dies) while they verify and fetch its tasks.

use std::fs::File;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};
use sha2::{Digest, Sha256};

use crate::error::RegistryError;

/// The cache root.
#[derive(Debug, Clone)]
pub struct Cache {
    /// `<root>` (datasets live under `<root>/datasets`).
    pub root: PathBuf,
}

/// A held repository lock; dropping it releases it.
#[derive(Debug)]
pub struct RepoLock {
    _file: File,
}

impl Cache {
    /// `RUNNER_CACHE_DIR`, else `$XDG_CACHE_HOME/runner`, else `~/.cache/runner`.
    pub fn from_env() -> Cache {
        let root = std::env::var_os("RUNNER_CACHE_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME")
                    .filter(|v| !v.is_empty())
                    .map(|d| PathBuf::from(d).join("runner"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("runner"))
            })
            .unwrap_or_else(|| std::env::temp_dir().join("runner-cache"));
        Cache { root }
    }

    fn datasets(&self) -> PathBuf {
        self.root.join("datasets")
    }

    /// A fresh staging directory on the cache's file system (removed when dropped, unless
    /// its contents were renamed away).
    pub fn staging(&self) -> Result<tempfile::TempDir, RegistryError> {
        let dir = self.datasets().join(".tmp");
        std::fs::create_dir_all(&dir).map_err(RegistryError::io(&dir))?;
        tempfile::Builder::new()
            .prefix("stage-")
            .tempdir_in(&dir)
            .map_err(RegistryError::io(&dir))
    }

    /// The directory of `repo` at `commit`.
    fn commit_dir(&self, repo: &str, commit: &str) -> PathBuf {
        self.datasets().join(key(repo, 60)).join(commit)
    }

    /// The entry of the task at `path` of `repo` at `commit`.
    pub fn entry(&self, repo: &str, commit: &str, path: &str) -> PathBuf {
        self.commit_dir(repo, commit).join(key(path, 80))
    }

    /// Waits for, then holds, the lock of `repo`.
    pub fn lock_repo(&self, repo: &str) -> Result<RepoLock, RegistryError> {
        let dir = self.datasets();
        std::fs::create_dir_all(&dir).map_err(RegistryError::io(&dir))?;
        let path = dir.join(format!("{}.lock", key(repo, 60)));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(RegistryError::io(&path))?;
        flock(&file, FlockOperation::LockExclusive).map_err(|e| RegistryError::Io {
            path,
            source: e.into(),
        })?;
        Ok(RepoLock { _file: file })
    }

    /// Where the last good copy of the registry at `url` is kept.
    pub fn registry_copy(&self, url: &str) -> PathBuf {
        self.root
            .join("registries")
            .join(format!("{}.json", key(url, 60)))
    }

    /// Keeps `text` as the registry copy at `path` (temp file + rename).
    pub fn keep_registry_copy(&self, path: &Path, text: &str) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    /// Dataset views live here (see [`crate::view`]).
    pub fn views(&self) -> PathBuf {
        self.root.join("views")
    }

    /// Moves `entry` out of the way (into staging, removed there), so a fresh fetch can take
    /// its place; a reader never sees a half-removed entry.
    pub fn discard(&self, entry: &Path) -> Result<(), RegistryError> {
        let stage = self.staging()?;
        let aside = stage.path().join("discarded");
        std::fs::rename(entry, &aside).map_err(RegistryError::io(entry))?;
        Ok(())
    }
}

/// `c` if a file name may hold it as it is (ASCII letters, digits, `-`, `_`, `.`), else `_`:
/// the one character rule of the cache's keys and the dataset views' names.
pub(crate) fn file_name_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
        c
    } else {
        '_'
    }
}

/// A file-name-safe, collision-free key for `text`: its readable part, then 12 hex digits of
/// its sha256.
pub fn key(text: &str, readable: usize) -> String {
    let mut clean: String = text
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_start_matches("git://")
        .trim_start_matches("file://")
        .chars()
        .map(file_name_char)
        .collect();
    clean = clean
        .trim_matches(['_', '.'])
        .chars()
        .take(readable)
        .collect();
    let hash = hex::encode(Sha256::digest(text.as_bytes()));
    format!("{clean}-{}", &hash[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_safe_names_and_differ_for_different_text() {
        let a = key("https://example.invalid/org/repo.git", 60);
        assert!(a.starts_with("example.invalid_org_repo.git-"), "{a}");
        assert!(!a.contains('/'));
        assert_ne!(key("../x", 60), key("__x", 60));
        assert!(!key("..", 60).starts_with('.'));
    }

    #[test]
    fn a_discarded_entry_is_gone_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache {
            root: dir.path().to_path_buf(),
        };
        let entry = cache.entry("r", "c", "p");
        std::fs::create_dir_all(entry.join("task")).unwrap();
        cache.discard(&entry).unwrap();
        assert!(!entry.exists());
    }
}
