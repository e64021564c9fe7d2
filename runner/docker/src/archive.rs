//! Moving files in and out of containers as tar streams.

use std::io::Read;
use std::path::{Component, Path};

use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::TryStreamExt;

use super::{DockerClient, DockerError};

/// Packs the contents of `source` as entries under `target` (an absolute container path).
/// Symlinks are stored as symlinks, never followed.
pub fn pack_dir(source: &Path, target: &str) -> std::io::Result<Vec<u8>> {
    let prefix = target.trim_start_matches('/').trim_end_matches('/');
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    let mut stack = vec![source.to_path_buf()];
    let mut entries = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.is_dir() {
                stack.push(path.clone());
            }
            entries.push(path);
        }
    }
    entries.sort();
    for path in entries {
        let rel = path
            .strip_prefix(source)
            .expect("walked path is under source");
        let name = if prefix.is_empty() {
            rel.to_path_buf()
        } else {
            Path::new(prefix).join(rel)
        };
        builder.append_path_with_name(&path, name)?;
    }
    builder.into_inner()
}

/// Packs one file with `mode` at `target`.
pub fn pack_file(bytes: &[u8], target: &str, mode: u32) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(mode);
    header.set_mtime(chrono::Utc::now().timestamp().max(0) as u64);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, target.trim_start_matches('/'), bytes)?;
    builder.into_inner()
}

/// Uploads a tar whose entry names are relative to `/`.
pub async fn upload(
    client: &DockerClient,
    container: &str,
    tar: Vec<u8>,
    what: &str,
) -> Result<(), DockerError> {
    let options = UploadToContainerOptionsBuilder::default().path("/").build();
    client
        .api()
        .upload_to_container(container, Some(options), bollard::body_full(tar.into()))
        .await
        .map_err(|e| DockerError::api(format!("uploading {what}"), e))
}

/// Downloads the contents of the container directory `source` into `target`.
/// Only regular files and directories are written: symlinks, FIFOs and devices an agent left
/// in its logs are skipped (and listed in the returned names), so nothing on the host is
/// ever reached through them.
pub async fn download_dir(
    client: &DockerClient,
    container: &str,
    source: &str,
    target: &Path,
) -> Result<Vec<String>, DockerError> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(source)
        .build();
    let bytes: Vec<u8> = client
        .api()
        .download_from_container(container, Some(options))
        .map_ok(|chunk| chunk.to_vec())
        .try_concat()
        .await
        .map_err(|e| DockerError::api(format!("downloading {source}"), e))?;
    let target = target.to_path_buf();
    let what = format!("unpacking {source} into {}", target.display());
    tokio::task::spawn_blocking(move || unpack_stripped(&bytes[..], &target))
        .await
        .map_err(|e| DockerError::Io {
            operation: what.clone(),
            source: std::io::Error::other(e),
        })?
        .map_err(|source| DockerError::Io {
            operation: what,
            source,
        })
}

/// Unpacks a tar whose first path component is the downloaded directory's own name.
fn unpack_stripped(reader: impl Read, target: &Path) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(target)?;
    let mut archive = tar::Archive::new(reader);
    let mut skipped = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let rel: std::path::PathBuf = path.components().skip(1).collect();
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            skipped.push(rel.display().to_string());
            continue;
        }
        let dest = target.join(&rel);
        match entry.header().entry_type() {
            tar::EntryType::Directory => std::fs::create_dir_all(&dest)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                // Replace, never write through, whatever is at the destination.
                if std::fs::symlink_metadata(&dest).is_ok_and(|m| !m.is_dir()) {
                    std::fs::remove_file(&dest)?;
                }
                let mut file = std::fs::File::create(&dest)?;
                std::io::copy(&mut entry, &mut file)?;
            }
            _ => skipped.push(rel.display().to_string()),
        }
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_then_unpack_round_trips_and_skips_symlinks() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("a/b")).unwrap();
        std::fs::write(src.path().join("a/b/file.txt"), "hello").unwrap();
        std::fs::write(src.path().join("top.sh"), "#!/bin/sh").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let tar = pack_dir(src.path(), "/logs/verifier").unwrap();
        let dst = tempfile::tempdir().unwrap();
        // The engine's download names entries after the directory's basename, like this pack.
        let skipped = unpack_stripped(&tar[..], dst.path()).unwrap();
        // Entries here are "logs/verifier/...": stripping one component leaves "verifier/...".
        assert_eq!(
            std::fs::read_to_string(dst.path().join("verifier/a/b/file.txt")).unwrap(),
            "hello"
        );
        assert!(dst.path().join("verifier/top.sh").is_file());
        assert!(std::fs::symlink_metadata(dst.path().join("verifier/link")).is_err());
        assert_eq!(skipped, vec!["verifier/link".to_string()]);
    }
}
