//! Mounts and namespaces: joining the trial's namespaces and anchoring the paths the tests
//! depend on in them (step 3 of the crate docs).

use super::*;

pub(crate) fn check(result: i32) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub(crate) fn cstring(text: &str) -> io::Result<CString> {
    CString::new(text).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
}

pub(crate) fn mount(
    source: Option<&str>,
    target: &str,
    fstype: Option<&str>,
    flags: std::os::raw::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstring).transpose()?;
    let target = cstring(target)?;
    let fstype = fstype.map(cstring).transpose()?;
    let data = data.map(cstring).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    check(unsafe {
        sys::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    })
}

pub(crate) fn join_namespaces(pid: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // Opened first, joined after: once the mount namespace changes, /proc/<pid> is the trial's.
    let open = |ns: &str| File::open(format!("/proc/{pid}/ns/{ns}"));
    let (uts, ipc, mnt) = (open("uts")?, open("ipc")?, open("mnt")?);
    check(unsafe { sys::setns(uts.as_raw_fd(), sys::CLONE_NEWUTS) })?;
    check(unsafe { sys::setns(ipc.as_raw_fd(), sys::CLONE_NEWIPC) })?;
    check(unsafe { sys::setns(mnt.as_raw_fd(), sys::CLONE_NEWNS) })
}

/// Anchors the paths the tests depend on in the trial's own mount namespace (step 3).
pub(crate) fn anchor_all() -> Result<(), String> {
    // /logs first: once it is a mount point nothing can move /logs/verifier out from under it.
    for (path, kind) in [
        ("/tests", Anchor::EmptyReadOnly),
        ("/logs", Anchor::SelfBind),
        ("/logs/verifier", Anchor::EmptyReadOnly),
    ] {
        anchor(path, kind)?;
    }
    let mounts = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading mountinfo: {e}"))?;
    for path in ["/tests", "/logs", "/logs/verifier"] {
        if !is_mount_point(&mounts, path) {
            return Err(format!(
                "{path} is not a mount point after anchoring it; something moved it"
            ));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Anchor {
    EmptyReadOnly,
    SelfBind,
    /// A directory above a pinned file (`pins.rs`): bound onto itself with its flags and the
    /// mounts under it as they are.
    Directory,
}

/// Makes `path` a real directory and a mount point. A symlink or file there (left by the agent)
/// is removed; an open descriptor is mounted on, so a swap after the check cannot redirect the
/// mount; mountinfo then shows whether the mount landed at `path`, and the whole step is retried
/// a few times against an agent that keeps swapping it.
pub(crate) fn anchor(path: &str, kind: Anchor) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    for _attempt in 0..20 {
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading mountinfo: {e}"))?;
        if kind != Anchor::EmptyReadOnly && is_mount_point(&mounts, path) {
            return Ok(());
        }
        let dir = match OpenOptions::new()
            .read(true)
            .custom_flags(0o200000 | 0o400000)
            .open(path)
        {
            Ok(dir) => dir,
            Err(_) => {
                let _ = match fs::symlink_metadata(path) {
                    Ok(meta) if meta.is_dir() => Ok(()),
                    Ok(_) => fs::remove_file(path),
                    Err(_) => Ok(()),
                };
                let _ = fs::create_dir(path);
                continue;
            }
        };
        let fd_path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let mounted = match kind {
            // Recursive: a directory such as `/etc` carries the engine's own mounts
            // (`/etc/hosts`, `/etc/resolv.conf`), which must stay on top of it.
            Anchor::SelfBind | Anchor::Directory => mount(
                Some(&fd_path),
                &fd_path,
                None,
                sys::MS_BIND | sys::MS_REC,
                None,
            ),
            Anchor::EmptyReadOnly => mount(
                Some("runner-anchor"),
                &fd_path,
                Some("tmpfs"),
                sys::MS_RDONLY | sys::MS_NOSUID | sys::MS_NODEV,
                Some("size=4k,mode=0755"),
            ),
        };
        mounted.map_err(|e| format!("mounting on {path}: {e}"))?;
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading mountinfo: {e}"))?;
        if is_mount_point(&mounts, path) {
            if kind == Anchor::SelfBind {
                // A bind keeps the source's flags; nodev/nosuid are not needed, rw is.
                let _ = mount(None, path, None, sys::MS_REMOUNT | sys::MS_BIND, None);
            }
            return Ok(());
        }
    }
    Err(format!(
        "{path} kept changing while it was being anchored (a process left by the agent?)"
    ))
}

/// True when `/proc/self/mountinfo` text has a mount at exactly `path` (field 5).
pub(crate) fn is_mount_point(mountinfo: &str, path: &str) -> bool {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|mount_point| mount_point == path)
}
