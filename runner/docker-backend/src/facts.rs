//! What the runner needs to know about the engine once per process: its version (recorded
//! with every image), its data root (where builds and pulls take disk space), its default
//! registry's index address (the key of that registry's credentials) and whether it can hand
//! GPUs to containers.

use std::path::{Path, PathBuf};

use crate::connect::DockerClient;
use crate::error::DockerError;

/// Facts about the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineFacts {
    /// `docker 20.10.24` (the engine's name and version).
    pub version: Option<String>,
    /// `DockerRootDir`: where images and build caches live.
    pub root_dir: Option<PathBuf>,
    /// `IndexServerAddress`: the default registry, as credentials are keyed for it.
    pub index_server: Option<String>,
    /// The engine lists the `nvidia` runtime among its `Runtimes` (see `gpus.rs`).
    pub gpu_runtime: bool,
    /// `NCPU`: the CPUs of the engine's host (a pool places trials against them).
    pub cpus: Option<u32>,
    /// `MemTotal`: the memory of the engine's host, in bytes.
    pub memory_bytes: Option<u64>,
}

impl EngineFacts {
    /// Asks the engine.
    pub async fn read(client: &DockerClient) -> Result<EngineFacts, DockerError> {
        let version = client
            .api()
            .version()
            .await
            .map_err(|e| DockerError::api("asking the engine for its version", e))?;
        let info = client
            .api()
            .info()
            .await
            .map_err(|e| DockerError::api("reading the engine's info", e))?;
        Ok(EngineFacts {
            version: version.version.map(|v| format!("docker {v}")),
            root_dir: info.docker_root_dir.map(PathBuf::from),
            index_server: info.index_server_address,
            gpu_runtime: info
                .runtimes
                .is_some_and(|runtimes| crate::gpus::is_gpu_runtime(runtimes.keys())),
            cpus: info.ncpu.and_then(|n| u32::try_from(n).ok()),
            memory_bytes: info.mem_total.and_then(|m| u64::try_from(m).ok()),
        })
    }
}

/// Bytes free for unprivileged use on the file system holding `path`, or `None` when `path`
/// is not on this host (a remote engine).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let stats = rustix::fs::statvfs(path).ok()?;
    Some(stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// Checks the engine's data root has at least `min_free` bytes free before `what` (a build or
/// a pull) starts. A data root this host cannot see is not checked (the engine is remote).
pub fn check_disk(facts: &EngineFacts, min_free: u64, what: &str) -> Result<(), DockerError> {
    let Some(root) = &facts.root_dir else {
        return Ok(());
    };
    match free_bytes(root) {
        Some(free) if free < min_free => Err(DockerError::DiskSpace {
            root: root.clone(),
            free,
            min_free,
            what: what.to_owned(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_is_compared_with_the_free_space_of_the_data_root() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(dir.path()).expect("a local directory");
        assert!(free > 0);
        let facts = EngineFacts {
            version: None,
            root_dir: Some(dir.path().to_owned()),
            index_server: None,
            gpu_runtime: false,
            cpus: None,
            memory_bytes: None,
        };
        assert!(check_disk(&facts, 1, "pulling x").is_ok());
        let err = check_disk(&facts, u64::MAX, "pulling x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pulling x") && err.contains(&dir.path().display().to_string()),
            "{err}"
        );
        let remote = EngineFacts {
            root_dir: Some("/nonexistent/runner-test-root".into()),
            ..facts
        };
        assert!(check_disk(&remote, u64::MAX, "pulling x").is_ok());
    }
}
