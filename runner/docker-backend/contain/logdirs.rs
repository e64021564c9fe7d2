//! `contain wait --make-dir DIR…`: the trial's `/logs` directories made by the early jail as
//! it starts, instead of by an upload into the trial container (`src/jail/warm.rs`).
//!
//! Why: the engine holds a container's lock for the whole of an archive call on it, and the
//! jail's start needs that lock (it checks that the container whose PID and network
//! namespaces it joins runs). An upload into the trial container beside the jail's start
//! delayed that start by the upload's length (0.07–0.1 s here, on every trial's path); made
//! here, the directories cost the jail a few system calls after its start.
//!
//! Why it is safe: the runner asks for it only when no process of the trial runs yet (the
//! trial container runs its init and `sleep infinity` until the agent phase, which waits for
//! this). The helper joins the trial's mount namespace, makes the directories as the upload
//! did (missing parents `0755`, each directory `0777`, owned by root, a non-directory in its
//! place removed), and goes back to its own mount namespace before it writes its answer, so
//! while it waits for the order it is again in its own root, as before.

use super::*;
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;

/// The answer on stdout: the directories are made.
pub(crate) const MADE: u8 = b'D';
/// The answer on stdout: they are not (why on stderr); the runner uploads them instead.
pub(crate) const NOT_MADE: u8 = b'F';

/// Makes `dirs` in the trial's root (that of PID 1 of the shared PID namespace) and returns
/// to the jail's own mount namespace.
pub(crate) fn make_in_trial(dirs: &[String]) -> Result<(), String> {
    let own = File::open("/proc/self/ns/mnt").map_err(|e| format!("/proc/self/ns/mnt: {e}"))?;
    let trial = File::open("/proc/1/ns/mnt").map_err(|e| format!("/proc/1/ns/mnt: {e}"))?;
    check(unsafe { sys::setns(trial.as_raw_fd(), sys::CLONE_NEWNS) })
        .map_err(|e| format!("joining the trial's mount namespace: {e}"))?;
    let made = dirs.iter().try_for_each(|dir| make_one(dir));
    // Back in the jail's own root whatever happened: the order is carried out from there.
    check(unsafe { sys::setns(own.as_raw_fd(), sys::CLONE_NEWNS) })
        .map_err(|e| format!("returning to the jail's mount namespace: {e}"))?;
    made
}

/// One directory, as the engine's extraction of a directory entry (mode `0777`, uid and gid
/// 0) makes it.
fn make_one(dir: &str) -> Result<(), String> {
    let path = Path::new(dir);
    if !path.is_absolute() {
        return Err(format!("{dir}: not an absolute path"));
    }
    let fail = |what: &str, e: io::Error| format!("{what} {dir}: {e}");
    if let Some(parent) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(|e| fail("making the parents of", e))?;
    }
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => fs::remove_file(path).map_err(|e| fail("removing what is at", e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail("looking at", e)),
    }
    match fs::create_dir(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail("making", e)),
    }
    // The umask left out of the mode above.
    fs::set_permissions(path, fs::Permissions::from_mode(0o777)).map_err(|e| fail("chmod", e))?;
    std::os::unix::fs::lchown(path, Some(0), Some(0)).map_err(|e| fail("chown", e))
}

/// The directories `contain wait` was asked to make (`--make-dir DIR`, repeated).
pub(crate) fn parse(args: &[String]) -> Result<Vec<String>, String> {
    let mut dirs = Vec::new();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--make-dir", Some(dir)) => dirs.push(dir.clone()),
            ("--make-dir", None) => return Err("--make-dir needs a value".into()),
            (other, _) => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(dirs)
}
