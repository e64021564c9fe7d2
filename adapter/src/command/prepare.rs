//! `[prepare]`: an agent's files fetched once on the host and given to every trial read-only.
//!
//! Harbor installs an agent in every container (its official installer, the agent's network
//! during setup, minutes on a slow image). A prepared agent is a wheel from the Python package
//! index (the `claude-agent-sdk` and `openai-codex-cli-bin` wheels bundle the official Claude
//! Code and Codex binaries), downloaded by the host's own `pip` (its index, proxy and CA
//! settings then just work), unpacked once into runner's cache, and bind-mounted read-only at
//! [`CONTAINER_DIR`] in each trial. Once means the files, never the state: the mount cannot be
//! written, and each trial's config and data directories are its own container's.
//!
//! The cache entry is made in a temporary directory beside it and renamed into place only
//! when whole, under a lock, so concurrent jobs share it and a failed fetch leaves nothing.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Where the prepared files appear in the container (executables under `bin/`).
pub const CONTAINER_DIR: &str = "/opt/runner-agent";

/// The record of a finished cache entry, written last.
const RECORD_FILE: &str = "prepared.json";

/// `[prepare]` of a command-style agent config.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PrepareSection {
    /// A wheel requirement, `NAME==VERSION` (`{kwargs.NAME}` placeholders allowed).
    pub wheel: String,
    /// The executables put under `/opt/runner-agent/bin/`: their name there → their path in
    /// the wheel.
    #[serde(default)]
    pub bin: BTreeMap<String, String>,
}

/// A prepared cache entry: what was fetched and where it is on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedFiles {
    /// The requirement fetched.
    pub requirement: String,
    /// The wheel's file name.
    pub wheel_file: String,
    /// `sha256:<hex>` of the wheel.
    pub wheel_sha256: String,
    /// The entry's directory on the host (mounted at [`CONTAINER_DIR`]).
    #[serde(skip)]
    pub host_dir: PathBuf,
}

/// Why an agent's files could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The requirement is not `NAME==VERSION`.
    #[error(
        "prepare.wheel {0:?} must pin one version (NAME==VERSION), so every trial gets the same files"
    )]
    Unpinned(String),
    /// pip failed (no Python, no index, no such version).
    #[error(
        "fetching {requirement} with `python3 -m pip download` failed{status}: {stderr}\nthe host needs python3 with pip and its package index; or run the agent with --ak install=harbor (Harbor's installer in each container)"
    )]
    Pip {
        /// The requirement.
        requirement: String,
        /// pip's exit status, when it ran.
        status: String,
        /// The end of pip's standard error.
        stderr: String,
    },
    /// A path the config names is not in the wheel.
    #[error("prepare.bin.{name}: {path:?} is not a file in {wheel}")]
    MissingBin {
        /// The executable's name.
        name: String,
        /// Its configured path.
        path: String,
        /// The wheel.
        wheel: String,
    },
    /// A file of the cache could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PrepareError {
    let path = path.to_path_buf();
    move |source| PrepareError::Io { what, path, source }
}

/// The root of runner's caches: `RUNNER_CACHE_DIR`, else `$XDG_CACHE_HOME/runner`, else
/// `~/.cache/runner`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("RUNNER_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("runner");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("runner")
}

/// The pip platform tag of this machine's containers (the engine runs them on this machine's
/// architecture).
fn platform_tag() -> String {
    format!("manylinux_2_17_{}", std::env::consts::ARCH)
}

/// The cache entry of `requirement` (a directory name safe on every file system).
fn entry_name(requirement: &str) -> String {
    let safe: String = requirement
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{safe}-{}", platform_tag())
}

/// Prepares `section` (placeholders already filled) under `cache_root`/agents, fetching it
/// only when no whole entry is there; `progress` hears one line when a fetch starts.
pub fn prepare(
    section: &PrepareSection,
    cache_root: &Path,
    progress: &dyn Fn(&str),
) -> Result<PreparedFiles, PrepareError> {
    let requirement = section.wheel.trim();
    let Some((name, version)) = requirement.split_once("==") else {
        return Err(PrepareError::Unpinned(requirement.to_owned()));
    };
    if name.trim().is_empty() || version.trim().is_empty() || version.contains(['*', ',']) {
        return Err(PrepareError::Unpinned(requirement.to_owned()));
    }
    let agents = cache_root.join("agents");
    fs::create_dir_all(&agents).map_err(io("creating", &agents))?;
    let entry = agents.join(entry_name(requirement));
    let lock_path = agents.join(format!(".{}.lock", entry_name(requirement)));
    let lock = fs::File::create(&lock_path).map_err(io("creating", &lock_path))?;
    // Held until this function returns: a second job waits here, then finds the entry whole.
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| io("locking", &lock_path)(e.into()))?;
    if let Some(found) = read_entry(&entry, section)? {
        return Ok(found);
    }
    progress(&format!(
        "preparing the agent: fetching {requirement} once with the host's pip (cached in {})",
        entry.display()
    ));
    let staging = agents.join(format!(".{}.partial", entry_name(requirement)));
    let _ = fs::remove_dir_all(&staging);
    let result = fetch_into(requirement, section, &staging);
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    let mut record = result?;
    let _ = fs::remove_dir_all(&entry);
    fs::rename(&staging, &entry).map_err(io("moving into place", &entry))?;
    record.host_dir = entry;
    Ok(record)
}

/// The entry at `dir` when it is whole (its record written last, every executable there).
fn read_entry(dir: &Path, section: &PrepareSection) -> Result<Option<PreparedFiles>, PrepareError> {
    let record_path = dir.join(RECORD_FILE);
    let Ok(text) = fs::read_to_string(&record_path) else {
        return Ok(None);
    };
    let Ok(mut record) = serde_json::from_str::<PreparedFiles>(&text) else {
        return Ok(None);
    };
    if record.requirement != section.wheel.trim() {
        return Ok(None);
    }
    let whole = section
        .bin
        .keys()
        .all(|name| dir.join("bin").join(name).is_file());
    if !whole {
        return Ok(None);
    }
    record.host_dir = dir.to_path_buf();
    Ok(Some(record))
}

/// Downloads the wheel into `staging/wheel/`, unpacks it into `staging/files/`, links the
/// executables into `staging/bin/` and writes the record.
fn fetch_into(
    requirement: &str,
    section: &PrepareSection,
    staging: &Path,
) -> Result<PreparedFiles, PrepareError> {
    let download = staging.join("wheel");
    fs::create_dir_all(&download).map_err(io("creating", &download))?;
    let output = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--platform", &platform_tag(), "--dest"])
        .arg(&download)
        .arg(requirement)
        .output();
    let pip_error = |status: String, stderr: &[u8]| {
        let stderr = String::from_utf8_lossy(stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(4).collect();
        PrepareError::Pip {
            requirement: requirement.to_owned(),
            status,
            stderr: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        }
    };
    let output = output.map_err(|e| pip_error(String::new(), e.to_string().as_bytes()))?;
    if !output.status.success() {
        return Err(pip_error(format!(" ({})", output.status), &output.stderr));
    }
    let wheel = fs::read_dir(&download)
        .map_err(io("reading", &download))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| pip_error(String::new(), b"pip wrote no wheel"))?;
    let wheel_file = wheel
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let wheel_sha256 = sha256_file(&wheel)?;
    let files = staging.join("files");
    unpack(&wheel, &files, requirement)?;
    fs::remove_dir_all(&download).map_err(io("removing", &download))?;
    link_executables(section, staging, &wheel_file)?;
    let record = PreparedFiles {
        requirement: requirement.to_owned(),
        wheel_file,
        wheel_sha256,
        host_dir: staging.to_path_buf(),
    };
    let record_path = staging.join(RECORD_FILE);
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    fs::write(&record_path, text).map_err(io("writing", &record_path))?;
    Ok(record)
}

/// `sha256:<hex>` of a file, streamed.
fn sha256_file(path: &Path) -> Result<String, PrepareError> {
    let mut file = fs::File::open(path).map_err(io("reading", path))?;
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(io("reading", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

/// Unpacks the wheel (a zip file) with the host's Python, which pip already needs, then
/// makes every ELF file executable (zip archives made by wheel tools often drop the mode).
fn unpack(wheel: &Path, into: &Path, requirement: &str) -> Result<(), PrepareError> {
    let output = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(wheel)
        .arg(into)
        .output()
        .map_err(io("unpacking", wheel))?;
    if !output.status.success() {
        return Err(PrepareError::Pip {
            requirement: requirement.to_owned(),
            status: format!(" (unpacking: {})", output.status),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    mark_executables(into)
}

fn mark_executables(dir: &Path) -> Result<(), PrepareError> {
    use std::os::unix::fs::PermissionsExt;
    for entry in fs::read_dir(dir).map_err(io("reading", dir))? {
        let entry = entry.map_err(io("reading", dir))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(io("reading", &path))?;
        if kind.is_dir() {
            mark_executables(&path)?;
        } else if kind.is_file() && is_elf(&path) {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                .map_err(io("marking executable", &path))?;
        }
    }
    Ok(())
}

fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// `bin/NAME` → `../files/PATH` for each configured executable (relative, so the links
/// resolve inside the container's mount as on the host).
fn link_executables(
    section: &PrepareSection,
    staging: &Path,
    wheel: &str,
) -> Result<(), PrepareError> {
    use std::os::unix::fs::PermissionsExt;
    let bin = staging.join("bin");
    fs::create_dir_all(&bin).map_err(io("creating", &bin))?;
    for (name, path) in &section.bin {
        let relative = Path::new(path);
        let target = staging.join("files").join(relative);
        let inside = relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside || !target.is_file() {
            return Err(PrepareError::MissingBin {
                name: name.clone(),
                path: path.clone(),
                wheel: wheel.to_owned(),
            });
        }
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755))
            .map_err(io("marking executable", &target))?;
        let link = bin.join(name);
        std::os::unix::fs::symlink(Path::new("../files").join(relative), &link)
            .map_err(io("linking", &link))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requirement_must_pin_one_version() {
        let dir = tempfile::tempdir().unwrap();
        for wheel in ["claude-agent-sdk", "x>=1", "x==", "==1", "x==1.*"] {
            let section = PrepareSection {
                wheel: wheel.into(),
                bin: BTreeMap::new(),
            };
            let err = prepare(&section, dir.path(), &|_| {}).unwrap_err();
            assert!(matches!(err, PrepareError::Unpinned(_)), "{wheel}: {err}");
        }
    }

    #[test]
    fn a_whole_entry_is_reused_and_a_partial_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let section = PrepareSection {
            wheel: "tool==1.0".into(),
            bin: BTreeMap::from([("tool".to_owned(), "pkg/tool".to_owned())]),
        };
        let entry = dir.path().join("agents").join(entry_name("tool==1.0"));
        fs::create_dir_all(entry.join("files/pkg")).unwrap();
        fs::write(entry.join("files/pkg/tool"), "#!/bin/sh\n").unwrap();
        link_executables(&section, &entry, "tool.whl").unwrap();
        assert_eq!(read_entry(&entry, &section).unwrap(), None, "no record yet");
        let record = PreparedFiles {
            requirement: "tool==1.0".into(),
            wheel_file: "tool-1.0-py3-none-any.whl".into(),
            wheel_sha256: "sha256:00".into(),
            host_dir: PathBuf::new(),
        };
        fs::write(
            entry.join(RECORD_FILE),
            serde_json::to_string(&record).unwrap(),
        )
        .unwrap();
        let found = prepare(&section, dir.path(), &|line| {
            panic!("a whole entry is not fetched again: {line}")
        })
        .unwrap();
        assert_eq!(found.host_dir, entry);
        assert_eq!(found.wheel_file, record.wheel_file);
        assert!(entry.join("bin/tool").is_file(), "the link resolves");
        let other = PrepareSection {
            wheel: "tool==1.0".into(),
            bin: BTreeMap::from([("other".to_owned(), "pkg/other".to_owned())]),
        };
        assert_eq!(read_entry(&entry, &other).unwrap(), None);
    }

    #[test]
    fn an_executable_outside_the_wheel_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("files")).unwrap();
        let section = PrepareSection {
            wheel: "tool==1.0".into(),
            bin: BTreeMap::from([("tool".to_owned(), "../../etc/passwd".to_owned())]),
        };
        let err = link_executables(&section, dir.path(), "tool.whl").unwrap_err();
        assert!(err.to_string().starts_with("prepare.bin.tool:"), "{err}");
    }
}
