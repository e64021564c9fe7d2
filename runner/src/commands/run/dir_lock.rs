//! One runner per job dir: an exclusive advisory lock on `<job>/.runner.lock` for as long as a
//! run writes the job. A second runner on the same dir (say a resume that a retry loop started
//! while the first run still goes) is refused instead of moving the first one's trials aside.
//! The kernel drops the lock when the process dies, so `kill -9` never leaves the dir locked.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::exit::CliError;

/// The lock file's name inside the job dir (hidden; Harbor's readers look at directories).
pub const LOCK_FILE: &str = ".runner.lock";

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub struct JobDirLock {
    _file: File,
}

/// Takes the lock of `job_dir`, or refuses when another process holds it.
pub fn lock(job_dir: &Path) -> Result<JobDirLock, CliError> {
    let path = job_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| CliError::bad_input_because(format!("cannot open {}", path.display()), e))?;
    // SAFETY: flock on a file descriptor this function owns; no memory is involved.
    let status = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if status != 0 {
        let error = std::io::Error::last_os_error();
        return Err(CliError::bad_input(
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                format!(
                    "{} is in use by another runner process; wait for it to end (or stop it) before resuming",
                    job_dir.display()
                )
            } else {
                format!("cannot lock {}: {error}", path.display())
            },
        ));
    }
    Ok(JobDirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_of_the_same_job_dir_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let err = lock(dir.path()).unwrap_err();
        assert!(
            err.to_string().contains("in use by another runner"),
            "{err}"
        );
        drop(first);
        lock(dir.path()).expect("free again");
    }
}
