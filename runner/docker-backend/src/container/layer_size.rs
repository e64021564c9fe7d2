//! The size of a trial container's writable layer, for the `storage_mb` watch
//! (`engine::trial::storage`), measured without the engine's size walk when it can be.
//!
//! The engine's own figure (`SizeRw` of an inspect with `size=true`) is a walk of the whole
//! container filesystem on drivers without a native diff: on `fuse-overlayfs` (this machine's
//! driver) it compares the merged tree with the image's, file by file through FUSE, which took
//! 0.5 s on a quiet machine and 4–6 s under load for a trivial image, on the trial's path as the
//! agent's run ends, and daemon CPU every two seconds while agents run. On the overlay
//! drivers the writable layer is one host directory (`GraphDriver.Data.UpperDir`, read once by
//! a plain inspect), so when that directory is on this host (the engine is local) its size is
//! summed here instead: the sizes of every entry that is not a directory, a file with several
//! links counted once, which is how the engine measures it on overlay2 with a native diff
//! (`directory.Size`). On `fuse-overlayfs` that counts a file the agent only copied up (a chmod, a
//! hard link's removal) in full, where the engine's walk does not: the watch can only stop a
//! trial earlier, never later.
//!
//! The directory's contents are the agent's: the walk never follows a link (every open is
//! `openat2` beneath the layer's root with `RESOLVE_NO_SYMLINKS`, `NO_MAGICLINKS` and
//! `NO_XDEV`), opens nothing but directories and reads only their entries' metadata. Any error
//! of the walk (a path too long, a directory the runner may not read, a kernel without
//! `openat2`) makes that look the engine's, as before; so do drivers without an upper
//! directory (btrfs, zfs, vfs) and remote engines, whose directory is not on this host (its path
//! holds the layer's random id, so no local directory is mistaken for it).

use std::collections::HashSet;
use std::ffi::CString;
use std::path::{Path, PathBuf};

use bollard::query_parameters::InspectContainerOptionsBuilder;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags};
use tokio::sync::OnceCell;

use crate::connect::DockerClient;

/// The drivers whose `UpperDir` is the whole writable layer.
const OVERLAY_DRIVERS: [&str; 3] = ["overlay2", "fuse-overlayfs", "overlay"];

/// Measures one container's writable layer (see the module docs).
pub(crate) struct LayerMeter {
    client: DockerClient,
    container: String,
    /// The layer's directory on this host, once looked up; `None` when the engine must measure.
    upper: OnceCell<Option<PathBuf>>,
}

impl LayerMeter {
    pub(crate) fn new(client: DockerClient, container: String) -> Self {
        Self {
            client,
            container,
            upper: OnceCell::new(),
        }
    }

    /// The writable layer's size in bytes; `None` when the engine does not say.
    pub(crate) async fn measure(&self) -> Result<Option<u64>, bollard::errors::Error> {
        if let Some(upper) = self.upper().await {
            let upper = upper.clone();
            let summed = tokio::task::spawn_blocking(move || tree_size(&upper)).await;
            if let Ok(Ok(bytes)) = summed {
                return Ok(Some(bytes));
            }
        }
        let options = InspectContainerOptionsBuilder::default().size(true).build();
        let inspected = self
            .client
            .api()
            .inspect_container(&self.container, Some(options))
            .await?;
        Ok(inspected.size_rw.and_then(|b| u64::try_from(b).ok()))
    }

    /// The layer's directory when the driver has one and it is a directory on this host (a
    /// failed inspect is asked again at the next look).
    async fn upper(&self) -> Option<&PathBuf> {
        let found = self
            .upper
            .get_or_try_init(|| async {
                let inspected = self
                    .client
                    .api()
                    .inspect_container(&self.container, None)
                    .await?;
                Ok::<_, bollard::errors::Error>(inspected.graph_driver.and_then(|driver| {
                    let upper = OVERLAY_DRIVERS
                        .contains(&driver.name.as_str())
                        .then(|| driver.data.get("UpperDir").cloned())
                        .flatten()?;
                    let path = PathBuf::from(upper);
                    let local = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                    (path.is_absolute() && local).then_some(path)
                }))
            })
            .await;
        found.ok().and_then(Option::as_ref)
    }
}

/// The sizes of every entry under `root` that is not a directory, each inode once, without
/// following any link (see the module docs).
pub(crate) fn tree_size(root: &Path) -> std::io::Result<u64> {
    let directory = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let beneath = ResolveFlags::BENEATH
        | ResolveFlags::NO_SYMLINKS
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV;
    let top = rustix::fs::open(root, directory, Mode::empty())?;
    let mut total = 0u64;
    let mut linked = HashSet::new();
    // Paths relative to `root`, opened from its descriptor: one directory open at a time.
    let mut pending = vec![CString::new(".").expect("no NUL")];
    while let Some(relative) = pending.pop() {
        let fd = rustix::fs::openat2(&top, relative.as_c_str(), directory, Mode::empty(), beneath)?;
        let entries = Dir::read_from(&fd)?;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let stat = match rustix::fs::statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                // Removed since the listing (the agent still runs): it takes no room now.
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
                let mut child = relative.as_bytes().to_vec();
                child.push(b'/');
                child.extend_from_slice(name);
                pending.push(CString::new(child).expect("a directory entry has no NUL"));
                continue;
            }
            let size = u64::try_from(stat.st_size).unwrap_or(0);
            if stat.st_nlink > 1 && !linked.insert((stat.st_dev, stat.st_ino)) {
                continue;
            }
            total = total.saturating_add(size);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_links_count_once_and_directories_and_link_targets_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("upper");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/file"), vec![0u8; 1000]).unwrap();
        std::fs::hard_link(root.join("a/b/file"), root.join("a/hard")).unwrap();
        std::fs::write(root.join("top"), vec![0u8; 24]).unwrap();
        // A large file outside the layer, reached only through links the walk must not follow.
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("big"), vec![0u8; 1 << 20]).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("a/out")).unwrap();
        std::os::unix::fs::symlink("../../outside/big", root.join("rel")).unwrap();
        let links = [&outside, Path::new("../../outside/big")]
            .iter()
            .map(|p| p.as_os_str().len() as u64)
            .sum::<u64>();
        assert_eq!(tree_size(&root).unwrap(), 1000 + 24 + links);
    }

    #[test]
    fn a_root_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        assert!(tree_size(&dir.path().join("link")).is_err());
        assert_eq!(tree_size(&dir.path().join("real")).unwrap(), 0);
    }
}
