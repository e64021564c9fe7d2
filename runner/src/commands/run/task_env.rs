//! `--task-env-from NAME`: the host variables a task's `${VAR}` env templates may read, and
//! the job's key for the digest its trial identities record of values drawn from the host.
//!
//! The key is 32 random bytes kept in the job dir (`.task-env-key`, mode 0600, written once):
//! a resume reads it back, so the same values give the same identities and trial names; a
//! reader of the records without it cannot test guesses of a weak value against the digest.
//! It is made only for a job that passes host variables; `runner scrub` leaves it out of
//! published copies.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use tasks::template::HostVars;

use crate::exit::CliError;

/// The key file's name inside the job dir (hidden; Harbor's readers look at directories).
pub use tasks::template::KEY_FILE;

/// The variables `names` of this host for `job_dir`'s tasks. With names, the job's key is
/// read from the job dir, or made anew (written by [`keep_key`] once the job is planned, so a
/// refused run leaves its job dir empty).
pub fn host_vars(
    names: &[String],
    allow_secrets: bool,
    job_dir: &Path,
) -> Result<HostVars, CliError> {
    for name in names {
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(CliError::bad_input(format!(
                "--task-env-from {name:?}: give a variable's name (NAME, not NAME=VALUE)"
            )));
        }
    }
    if names.is_empty() {
        return Ok(HostVars::none());
    }
    let key = job_key(job_dir).map_err(|e| {
        CliError::runner_because(
            format!("cannot read or write {}", job_dir.join(KEY_FILE).display()),
            e,
        )
    })?;
    Ok(HostVars::from_host(names, allow_secrets, key))
}

/// Writes `host`'s key into `job_dir` (0600, fsynced) unless the job has one or passes no
/// host variable.
pub fn keep_key(host: &HostVars, job_dir: &Path) -> Result<(), CliError> {
    let path = job_dir.join(KEY_FILE);
    if host.names().is_empty() || path.exists() {
        return Ok(());
    }
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(hex::encode(host.digest_key()).as_bytes())?;
        file.sync_all()
    };
    write().map_err(|e| CliError::runner_because(format!("cannot write {}", path.display()), e))
}

/// The job's key: the one in `job_dir`, else a new random one.
fn job_key(job_dir: &Path) -> std::io::Result<Vec<u8>> {
    let path = job_dir.join(KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            return hex::decode(text.trim()).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not hex: {e}"))
            });
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        Err(_) => {}
    }
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_made_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["RUNNER_TASK_ENV_TEST_SURELY_UNSET".to_owned()];
        let first = host_vars(&names, false, dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        assert!(!path.exists(), "written only once the job is planned");
        keep_key(&first, dir.path()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        assert_eq!(host_vars(&names, false, dir.path()).unwrap(), first);
        assert_eq!(std::fs::read_to_string(&path).unwrap().len(), 64);
    }

    #[test]
    fn no_names_no_key_and_bad_names_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(host_vars(&[], false, dir.path()).unwrap(), HostVars::none());
        assert!(!dir.path().join(KEY_FILE).exists());
        let err = host_vars(&["A=1".to_owned()], false, dir.path()).unwrap_err();
        assert!(err.to_string().contains("--task-env-from"), "{err}");
    }
}
