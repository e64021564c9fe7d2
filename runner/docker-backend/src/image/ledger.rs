//! The images runner made available — built (also labelled `runner.managed`) or pulled (an
//! image from a registry cannot be labelled) — and when a job last used each, so `runner
//! images prune` removes only runner's own images that no recent job used. An image that was
//! already present when a job found it is the user's and is never recorded.
//!
//! The ledger is one JSON file, `images.json` in the state directory (`$RUNNER_STATE_DIR`,
//! else `$XDG_STATE_HOME/runner`, else `~/.local/state/runner`), rewritten atomically under an
//! advisory lock so concurrent runs do not lose each other's entries.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The ledger file's largest accepted size (thousands of entries fit in far less).
const MAX_LEDGER_BYTES: u64 = 16 << 20;

/// How runner made an image available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LedgerOrigin {
    /// Built from a task's Dockerfile.
    Built,
    /// Pulled from a registry.
    Pulled,
}

/// One image of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The engine's image id when it was last used.
    pub id: String,
    /// Built or pulled.
    pub origin: LedgerOrigin,
    /// When runner first made it available.
    pub added_at: DateTime<Utc>,
    /// When a job last used it.
    pub last_used_at: DateTime<Utc>,
}

/// The ledger: entries by image reference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerFile {
    /// Image reference → entry.
    pub images: BTreeMap<String, LedgerEntry>,
}

/// A handle on the ledger file.
#[derive(Debug, Clone)]
pub struct Ledger {
    path: PathBuf,
}

/// The default state directory.
pub fn default_state_dir() -> Option<PathBuf> {
    let from = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from("RUNNER_STATE_DIR")
        .or_else(|| from("XDG_STATE_HOME").map(|d| d.join("runner")))
        .or_else(|| from("HOME").map(|h| h.join(".local/state/runner")))
}

impl Ledger {
    /// The ledger in `state_dir`.
    pub fn new(state_dir: &Path) -> Ledger {
        Ledger {
            path: state_dir.join("images.json"),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the ledger; a missing file is empty.
    pub fn read(&self) -> std::io::Result<LedgerFile> {
        match tasks::bounded::read_capped(&self.path, MAX_LEDGER_BYTES, "image ledger") {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", self.path.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LedgerFile::default()),
            Err(e) => Err(e),
        }
    }

    /// Applies `edit` to the ledger under the lock and writes it back atomically.
    pub fn update<T>(&self, edit: impl FnOnce(&mut LedgerFile) -> T) -> std::io::Result<T> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("images.json.lock"))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
        let mut ledger = self.read()?;
        let out = edit(&mut ledger);
        tasks::atomic::write_json_atomic(&self.path, &ledger)?;
        // The lock goes with the file handle.
        drop(lock);
        Ok(out)
    }

    /// Records that a job used `reference` (id `id`) now. `origin` is how this job made it
    /// available, or `None` when the job found it present: then only an image already in the
    /// ledger (runner's own, from an earlier job) is touched.
    pub fn record_use(
        &self,
        reference: &str,
        id: &str,
        origin: Option<LedgerOrigin>,
    ) -> std::io::Result<()> {
        let now = Utc::now();
        self.update(|ledger| match (ledger.images.get_mut(reference), origin) {
            (Some(entry), _) => {
                entry.id = id.to_owned();
                entry.last_used_at = now;
                if let Some(origin) = origin {
                    entry.origin = origin;
                }
            }
            (None, Some(origin)) => {
                ledger.images.insert(
                    reference.to_owned(),
                    LedgerEntry {
                        id: id.to_owned(),
                        origin,
                        added_at: now,
                        last_used_at: now,
                    },
                );
            }
            (None, None) => {}
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_images_runner_made_are_recorded_and_uses_refresh_them() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(&dir.path().join("state"));
        ledger.record_use("users/own:1", "sha256:u", None).unwrap();
        assert!(ledger.read().unwrap().images.is_empty(), "found, not made");
        ledger
            .record_use("127.0.0.1:5000/x:1", "sha256:a", Some(LedgerOrigin::Pulled))
            .unwrap();
        let first = ledger.read().unwrap().images["127.0.0.1:5000/x:1"].clone();
        assert_eq!(first.origin, LedgerOrigin::Pulled);
        ledger
            .record_use("127.0.0.1:5000/x:1", "sha256:b", None)
            .unwrap();
        let again = ledger.read().unwrap().images["127.0.0.1:5000/x:1"].clone();
        assert_eq!(again.id, "sha256:b");
        assert_eq!(again.added_at, first.added_at);
        assert!(again.last_used_at >= first.last_used_at);
    }

    #[test]
    fn concurrent_writers_keep_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        std::thread::scope(|scope| {
            for i in 0..8 {
                let ledger = ledger.clone();
                scope.spawn(move || {
                    ledger
                        .record_use(&format!("img{i}:1"), "sha256:x", Some(LedgerOrigin::Built))
                        .unwrap()
                });
            }
        });
        assert_eq!(ledger.read().unwrap().images.len(), 8);
    }
}
