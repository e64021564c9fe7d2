//! Putting the plan of `toolchain.rs` into the trial's mount namespace.
//!
//! In the jail's own namespace the image's files are copied into a private tmpfs
//! (`/.runner/pristine`) and each pin gets a detached clone of its source (`open_tree`); after
//! the helper joins the trial, the clones are attached over the trial's paths (`move_mount`).
//! Why a copy and not the jail's root itself: a mount of the jail's root filesystem inside the
//! trial would keep the jail's storage busy after the jail is removed. Why in the trial's own
//! namespace and not only in the tests' private one: there a pinned path is a mount point, so
//! no process the agent left can unlink, rename or replace it (`EBUSY`), and every directory
//! above it is anchored the same way, so none can be renamed away either.

use super::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The tmpfs in the jail's root that holds the sources of the pins.
const PRISTINE: &str = "/.runner/pristine";

/// Clones ready to be attached: each pin's (target, whether it is a directory, clone), and
/// the image's own pytest configuration files at `/` by name (for `rootview.rs`).
pub(crate) struct Prepared {
    pub clones: Vec<(String, bool, OwnedFd)>,
    pub configs: Vec<(String, OwnedFd)>,
}

/// The image's files copied into the pristine tmpfs while the agent runs (`contain wait`,
/// before the order): the copy is most of a verification's own time (about 0.05 s of a
/// trivial test's 0.12 s here), and it reads only the jail's own root, the image as built,
/// which nothing of the trial can reach. [`prepare`] takes each pin's copy from here when
/// there is one and copies the rest itself.
pub(crate) struct Precopied {
    /// (the image's path, its copy in the tmpfs).
    copies: Vec<(String, String)>,
}

/// Mounts the pristine tmpfs and copies `sources` (`toolchain::image_sources`) into it; `None`
/// when the tmpfs cannot be mounted (the order then does it all, as without a copy ahead). A
/// source that cannot be copied is left to the order.
pub(crate) fn precopy(sources: &[String]) -> Option<Precopied> {
    mount_pristine().ok()?;
    let copies = sources
        .iter()
        .enumerate()
        .filter_map(|(n, source)| {
            let path = format!("{PRISTINE}/ahead-{n}");
            fs::copy(source, &path).ok()?;
            Some((source.clone(), path))
        })
        .collect();
    Some(Precopied { copies })
}

fn mount_pristine() -> Result<(), Failure> {
    let unavailable = |what: &str, e: io::Error| Failure::Unavailable(format!("{what}: {e}"));
    fs::create_dir_all(PRISTINE).map_err(|e| unavailable(PRISTINE, e))?;
    mount(
        Some(toolchain::PRISTINE_SOURCE),
        PRISTINE,
        Some("tmpfs"),
        sys::MS_NOSUID | sys::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| unavailable("mounting the pristine tmpfs", e))
}

/// Copies the sources of `plan` into a private tmpfs of the jail (those `ahead` holds already
/// are taken from it) and clones one detached mount per pin. Runs in the jail's own mount
/// namespace.
pub(crate) fn prepare(plan: &Plan, ahead: Option<Precopied>) -> Result<Prepared, Failure> {
    let unavailable = |what: &str, e: io::Error| Failure::Unavailable(format!("{what}: {e}"));
    let mut made: Vec<(Source, String)> = match ahead {
        Some(ahead) => ahead
            .copies
            .into_iter()
            .map(|(source, path)| (Source::Image(source), path))
            .collect(),
        None => {
            mount_pristine()?;
            Vec::new()
        }
    };
    let mut made_clones = Vec::new();
    for pin in &plan.pins {
        let path = match made.iter().find(|(source, _)| *source == pin.source) {
            Some((_, path)) => path.clone(),
            None => {
                let path = format!("{PRISTINE}/{}", made.len());
                materialize(&pin.source, &path)
                    .map_err(|e| unavailable(&format!("copying the image's {}", pin.target), e))?;
                made.push((pin.source.clone(), path.clone()));
                path
            }
        };
        made_clones.push((pin.target.clone(), pin.source == Source::EmptyDir, path));
    }
    let mut configs = Vec::new();
    for name in PYTEST_CONFIGS {
        let from = format!("/{name}");
        if fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
            let path = format!("{PRISTINE}/config-{name}");
            fs::copy(&from, &path).map_err(|e| unavailable(&format!("copying {from}"), e))?;
            configs.push(((*name).to_owned(), path));
        }
    }
    // Read-only at the filesystem itself, before any clone: a root process of the agent
    // could otherwise write through a pinned path into the copy, and only CAP_SYS_ADMIN,
    // which no trial process holds, can make it writable again.
    mount(
        None,
        PRISTINE,
        None,
        sys::MS_REMOUNT | sys::MS_RDONLY | sys::MS_NOSUID | sys::MS_NODEV,
        None,
    )
    .map_err(|e| unavailable("making the pristine copies read-only", e))?;
    let clones = made_clones
        .into_iter()
        .map(|(target, is_dir, path)| Ok((target, is_dir, open_tree(&path)?)))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| unavailable("cloning a pinned file", e))?;
    let configs = configs
        .into_iter()
        .map(|(name, path)| Ok((name, open_tree(&path)?)))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| unavailable("cloning a pinned file", e))?;
    Ok(Prepared { clones, configs })
}

fn materialize(source: &Source, path: &str) -> io::Result<()> {
    match source {
        Source::Image(from) => fs::copy(from, path).map(drop),
        Source::EmptyFile => fs::write(path, b""),
        Source::EmptyDir => fs::create_dir(path),
        Source::Filtered(bytes) => fs::write(path, bytes),
    }
}

pub(crate) fn open_tree(path: &str) -> io::Result<OwnedFd> {
    let path = cstring(path)?;
    let fd = unsafe {
        sys::syscall(
            sys::SYS_OPEN_TREE,
            sys::AT_FDCWD,
            path.as_ptr(),
            sys::OPEN_TREE_CLONE | sys::OPEN_TREE_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Attaches the clones over the trial's paths. Runs in the trial's mount namespace, after the
/// `/tests` and `/logs` anchors. A path the agent made impossible to pin (a directory where
/// the image has a program) blocks the verification: the agent's doing.
pub(crate) fn apply(clones: Vec<(String, bool, OwnedFd)>) -> Result<(), Failure> {
    let mut anchored: Vec<String> = Vec::new();
    for (target, is_dir, clone) in clones {
        let (parent, name) = match target.rsplit_once('/') {
            Some((parent, name)) if !name.is_empty() => (parent.to_owned(), name.to_owned()),
            _ => continue,
        };
        anchor_ancestors(&parent, &mut anchored)?;
        let blocked = |what: &str, e: io::Error| Failure::Blocked(format!("{target}: {what}: {e}"));
        if fs::symlink_metadata(&target).is_err() {
            let made = if is_dir {
                fs::create_dir(&target)
            } else {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&target)
                    .map(drop)
            };
            made.map_err(|e| blocked("making a place for the image's file", e))?;
        }
        let parent_dir = OpenOptions::new()
            .read(true)
            .custom_flags(0o200000 | 0o400000) // O_DIRECTORY | O_NOFOLLOW
            .open(if parent.is_empty() { "/" } else { &parent })
            .map_err(|e| blocked("opening its directory", e))?;
        attach_at(&clone, parent_dir.as_raw_fd(), &name)
            .map_err(|e| blocked("putting the image's file in place", e))?;
    }
    Ok(())
}

/// Attaches the detached mount `clone` at `path` (a new empty file of ours).
pub(crate) fn attach(clone: &OwnedFd, path: &str) -> io::Result<()> {
    attach_at(clone, sys::AT_FDCWD, path)
}

/// Attaches `clone` at `name` under the directory `dir`, on the entry itself: a link there is
/// covered, not followed.
fn attach_at(clone: &OwnedFd, dir: i32, name: &str) -> io::Result<()> {
    let name = cstring(name)?;
    let empty = cstring("")?;
    let moved = unsafe {
        sys::syscall(
            sys::SYS_MOVE_MOUNT,
            clone.as_raw_fd(),
            empty.as_ptr(),
            dir,
            name.as_ptr(),
            sys::MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Anchors every directory from `/` down to `dir` (a bind onto itself), so none can be
/// renamed or replaced while the tests run; a missing one is made (as `anchor` does).
fn anchor_ancestors(dir: &str, anchored: &mut Vec<String>) -> Result<(), Failure> {
    let mut path = String::new();
    for part in dir.split('/').filter(|p| !p.is_empty()) {
        path.push('/');
        path.push_str(part);
        if anchored.contains(&path) {
            continue;
        }
        anchor(&path, Anchor::Directory).map_err(Failure::Blocked)?;
        anchored.push(path.clone());
    }
    Ok(())
}
