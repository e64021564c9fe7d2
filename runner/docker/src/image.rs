//! Task images: built once per task from `environment/` under a content-addressed tag, so a
//! later job with the same environment reuses it.

use std::collections::HashMap;
use std::path::Path;

use bollard::query_parameters::BuildImageOptionsBuilder;
use engine::{ImageInfo, ImageOrigin, OutputSink};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tasks::Task;

use super::labels::{MANAGED, TASK};
use super::{DockerClient, DockerError};

/// Makes sure the image of `task` exists: reuses the content-addressed tag unless
/// `force_build`, builds from `environment/Dockerfile`, or checks the prebuilt `docker_image`.
/// The build log is streamed to `log`.
pub async fn ensure_task_image(
    client: &DockerClient,
    task: &Task,
    force_build: bool,
    log: &OutputSink,
) -> Result<ImageInfo, DockerError> {
    let env_dir = task.environment_dir();
    let dockerfile = env_dir.join("Dockerfile");
    if !dockerfile.is_file() {
        let image = task
            .config
            .environment
            .docker_image
            .clone()
            .unwrap_or_default();
        let id = inspect_id(client, &image)
            .await?
            .ok_or_else(|| DockerError::MissingImage {
                task: task.name.clone(),
                image: image.clone(),
            })?;
        return Ok(ImageInfo::new(image, id, ImageOrigin::Reused));
    }
    let context = build_context(&env_dir).map_err(|source| DockerError::Io {
        operation: format!("packing {} as a build context", env_dir.display()),
        source,
    })?;
    let tag = format!(
        "runner-task-{}:{}",
        sanitize(task.short_name()),
        &hex::encode(Sha256::digest(&context))[..16]
    );
    if !force_build && let Some(id) = inspect_id(client, &tag).await? {
        return Ok(ImageInfo::new(tag, id, ImageOrigin::Reused));
    }
    let labels = HashMap::from([(MANAGED, "1"), (TASK, task.name.as_str())]);
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(&tag)
        .rm(true)
        // Without forcerm a failed RUN leaves its intermediate container behind.
        .forcerm(true)
        .nocache(force_build)
        .labels(&labels)
        .build();
    let mut stream =
        client
            .api()
            .build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(line) = info.stream {
                    log("build", line.as_bytes());
                }
            }
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                return Err(DockerError::Build {
                    task: task.name.clone(),
                    message: error,
                });
            }
            Err(source) => {
                return Err(DockerError::api(
                    format!("building the image of task {}", task.name),
                    source,
                ));
            }
        }
    }
    let id = inspect_id(client, &tag)
        .await?
        .ok_or_else(|| DockerError::Build {
            task: task.name.clone(),
            message: format!("the build finished but {tag} does not exist"),
        })?;
    Ok(ImageInfo::new(tag, id, ImageOrigin::Built))
}

async fn inspect_id(client: &DockerClient, image: &str) -> Result<Option<String>, DockerError> {
    match client.api().inspect_image(image).await {
        Ok(inspect) => Ok(inspect.id),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(source) => Err(DockerError::api(
            format!("inspecting image {image}"),
            source,
        )),
    }
}

/// A deterministic tar of the build context: sorted entries, fixed metadata, so the same
/// environment always hashes (and tags) the same.
fn build_context(dir: &Path) -> std::io::Result<Vec<u8>> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut builder = tar::Builder::new(Vec::new());
    for rel in files {
        let path = dir.join(&rel);
        let meta = std::fs::metadata(&path)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(meta.len());
        header.set_mode(if is_executable(&meta) { 0o755 } else { 0o644 });
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, &rel, std::fs::File::open(&path)?)?;
    }
    builder.into_inner()
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if path.is_file() {
            let rel = path.strip_prefix(root).expect("under root");
            out.push(
                rel.components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/"),
            );
        }
    }
    Ok(())
}

fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// Lowercases and replaces anything outside `[a-z0-9._-]` with `-`, as Docker names require.
pub fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_makes_docker_safe_names() {
        assert_eq!(sanitize("Hello World/Task_1"), "hello-world-task_1");
        assert_eq!(sanitize("-x-"), "x");
    }

    #[test]
    fn build_context_ignores_mtimes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Dockerfile"), "FROM x\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.txt"), "a").unwrap();
        let first = build_context(dir.path()).unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(dir.path().join("sub/a.txt"))
            .unwrap();
        file.set_modified(
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(12345),
        )
        .unwrap();
        assert_eq!(build_context(dir.path()).unwrap(), first);
        std::fs::write(dir.path().join("sub/a.txt"), "b").unwrap();
        assert_ne!(build_context(dir.path()).unwrap(), first);
    }
}
