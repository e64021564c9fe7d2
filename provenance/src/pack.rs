//! Deterministic tars of host directories for the container engine: image build contexts and
//! uploads into a container. Both use the one walker ([`crate::walk`]) and the one writer
//! ([`crate::archive`]) that agent sources use, so they share its guarantees:
//!
//! - **Symlinks are stored as symlinks and never followed**, wherever they point: a link to a
//!   directory outside the tree sends the link, not what is behind it. That is what `docker
//!   build` itself does with a context, and the engine resolves such links inside the context
//!   (or the container), never on the host.
//! - **The bytes depend only on content**: sorted entries, fixed mtime, uid/gid 0, modes
//!   reduced to 0755/0644 by the owner exec bit (see [`crate::archive`]). The same directory
//!   packs to the same bytes on every machine, so a build context's sha256 can name its image.
//! - Names that are not UTF-8 or hold a newline, and entries that are not files, directories
//!   or symlinks (FIFOs, sockets, devices), are refused with an error naming the path.

use std::io::Write;
use std::path::Path;

use crate::archive::{ArchiveCounts, write_entries};
use crate::dockerignore::DockerIgnore;
use crate::error::ArchiveError;
use crate::walk::{NoExclusions, walk_tree};

/// The deterministic tar of the image build context `dir` for a build of `dockerfile` (its
/// path relative to `dir`), with entries named relative to `dir`, leaving out what its
/// `.dockerignore` (or `<dockerfile>.dockerignore`) excludes; see [`DockerIgnore`] for the
/// rules and where they differ from Docker's. The Dockerfile and the ignore files are always
/// included.
pub fn build_context(dir: &Path, dockerfile: &str) -> Result<Vec<u8>, ArchiveError> {
    let mut tar = Vec::new();
    write_build_context(dir, dockerfile, &mut tar)?;
    Ok(tar)
}

/// [`build_context`], streamed into `out` (the archive is finished when this returns).
pub fn write_build_context(
    dir: &Path,
    dockerfile: &str,
    out: impl Write,
) -> Result<ArchiveCounts, ArchiveError> {
    let rules = DockerIgnore::for_build(dir, dockerfile)?;
    let tree = walk_tree(dir, &rules)?;
    write_entries(&tree.entries, "", out)
}

/// The deterministic tar of the contents of the host directory `source`, each entry named under
/// the absolute container path `target` (`/logs/verifier` gives `logs/verifier/a.txt`), for
/// uploading into a container at `/`. Neither `source` itself nor the directories of `target`
/// are entries, so the upload never changes the mode or owner of an existing target directory;
/// create `target` first.
pub fn pack_dir(source: &Path, target: &str) -> Result<Vec<u8>, ArchiveError> {
    let mut tar = Vec::new();
    write_dir(source, target, &mut tar)?;
    Ok(tar)
}

/// [`pack_dir`], streamed into `out` (the archive is finished when this returns).
pub fn write_dir(
    source: &Path,
    target: &str,
    out: impl Write,
) -> Result<ArchiveCounts, ArchiveError> {
    let prefix = entry_prefix(target)?;
    let tree = walk_tree(source, &NoExclusions)?;
    write_entries(&tree.entries, &prefix, out)
}

/// `target` without its leading and trailing `/`, refused unless it is absolute and made only
/// of plain names (a `..` would let entries land outside it).
fn entry_prefix(target: &str) -> Result<String, ArchiveError> {
    let prefix = target.trim_matches('/');
    let plain = prefix.is_empty()
        || prefix
            .split('/')
            .all(|part| !matches!(part, "" | "." | ".."));
    if !target.starts_with('/') || !plain {
        return Err(ArchiveError::BadTarget {
            target: target.to_owned(),
        });
    }
    Ok(prefix.to_owned())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use testkit::files::{set_mtime, write, write_all};

    use super::*;

    /// `(name, entry type, link target)` of every entry of `tar`, in order.
    fn listing(tar: &[u8]) -> Vec<(String, tar::EntryType, Option<String>)> {
        tar::Archive::new(tar)
            .entries()
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let link = entry
                    .link_name()
                    .unwrap()
                    .map(|l| l.to_string_lossy().into_owned());
                (
                    entry.path().unwrap().to_string_lossy().into_owned(),
                    entry.header().entry_type(),
                    link,
                )
            })
            .collect()
    }

    fn names(tar: &[u8]) -> Vec<String> {
        listing(tar).into_iter().map(|(name, ..)| name).collect()
    }

    #[test]
    fn build_context_never_follows_a_symlink_out_of_the_context() {
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret/creds.txt", "host-only-secret-value");
        let ctx = tempfile::tempdir().unwrap();
        write(ctx.path(), "Dockerfile", "FROM scratch\nCOPY . /\n");
        symlink(outside.path().join("secret"), ctx.path().join("linked-dir")).unwrap();
        symlink("../../etc/passwd", ctx.path().join("linked-file")).unwrap();
        let tar = build_context(ctx.path(), "Dockerfile").unwrap();
        let listing = listing(&tar);
        assert_eq!(
            listing,
            [
                ("Dockerfile".to_owned(), tar::EntryType::Regular, None),
                (
                    "linked-dir".to_owned(),
                    tar::EntryType::Symlink,
                    Some(outside.path().join("secret").display().to_string())
                ),
                (
                    "linked-file".to_owned(),
                    tar::EntryType::Symlink,
                    Some("../../etc/passwd".to_owned())
                ),
            ]
        );
        let secret = b"host-only-secret-value";
        assert!(!tar.windows(secret.len()).any(|w| w == secret));
    }

    #[test]
    fn build_context_ignores_mtimes_but_not_content_or_exec_bits() {
        let ctx = tempfile::tempdir().unwrap();
        write(ctx.path(), "Dockerfile", "FROM x\n");
        write(ctx.path(), "sub/a.txt", "a");
        let first = build_context(ctx.path(), "Dockerfile").unwrap();
        set_mtime(&ctx.path().join("sub/a.txt"), "@12345");
        set_mtime(&ctx.path().join("Dockerfile"), "@99");
        assert_eq!(build_context(ctx.path(), "Dockerfile").unwrap(), first);
        for entry in tar::Archive::new(first.as_slice()).entries().unwrap() {
            let entry = entry.unwrap();
            assert_eq!(entry.header().mtime().unwrap(), 1_153_704_088);
            assert_eq!(entry.header().uid().unwrap(), 0);
        }
        std::fs::write(ctx.path().join("sub/a.txt"), "b").unwrap();
        let changed = build_context(ctx.path(), "Dockerfile").unwrap();
        assert_ne!(changed, first);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            ctx.path().join("sub/a.txt"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_ne!(build_context(ctx.path(), "Dockerfile").unwrap(), changed);
    }

    #[test]
    fn build_context_honours_dockerignore_with_exceptions() {
        let ctx = tempfile::tempdir().unwrap();
        write(ctx.path(), "Dockerfile", "FROM x\n");
        write(
            ctx.path(),
            ".dockerignore",
            "# build junk\n*.log\nnode_modules\ncache\n!cache/keep.txt\nDockerfile\n",
        );
        write_all(
            ctx.path(),
            &[
                ("app.py", "print()\n"),
                ("run.log", "x"),
                ("sub/run.log", "root-only pattern: kept"),
                ("node_modules/a/index.js", "x"),
                ("cache/drop.bin", "x"),
                ("cache/keep.txt", "kept by the exception"),
            ],
        );
        assert_eq!(
            names(&build_context(ctx.path(), "Dockerfile").unwrap()),
            [
                ".dockerignore",
                "Dockerfile",
                "app.py",
                "cache/keep.txt",
                "sub/",
                "sub/run.log"
            ]
        );
        // Dockerfile.dockerignore replaces .dockerignore.
        write(ctx.path(), "Dockerfile.dockerignore", "sub\n");
        let names = names(&build_context(ctx.path(), "Dockerfile").unwrap());
        assert!(names.contains(&"run.log".to_owned()), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("sub")), "{names:?}");
    }

    #[test]
    fn a_named_dockerfile_has_its_own_ignore_file_and_is_always_sent() {
        let ctx = tempfile::tempdir().unwrap();
        write(ctx.path(), ".dockerignore", "notes.txt\n");
        write_all(
            ctx.path(),
            &[
                ("docker/Dockerfile.main", "FROM x\n"),
                (
                    "docker/Dockerfile.main.dockerignore",
                    "Dockerfile*\ndocker\napp.log\n",
                ),
                ("app.log", "x"),
                ("notes.txt", "kept: .dockerignore is replaced"),
            ],
        );
        let sent = names(&build_context(ctx.path(), "docker/Dockerfile.main").unwrap());
        assert!(
            sent.contains(&"docker/Dockerfile.main".to_owned()),
            "{sent:?}"
        );
        assert!(
            sent.contains(&"docker/Dockerfile.main.dockerignore".to_owned()),
            "{sent:?}"
        );
        assert!(sent.contains(&"notes.txt".to_owned()), "{sent:?}");
        assert!(!sent.contains(&"app.log".to_owned()), "{sent:?}");
        // The default Dockerfile of the same context goes by .dockerignore.
        let default = names(&build_context(ctx.path(), "Dockerfile").unwrap());
        assert!(default.contains(&"app.log".to_owned()), "{default:?}");
        assert!(!default.contains(&"notes.txt".to_owned()), "{default:?}");
    }

    #[test]
    fn build_context_sends_what_docker_build_copies() {
        let ctx = tempfile::tempdir().unwrap();
        for rel in [
            "Dockerfile",
            "a.log",
            "sub/a.log",
            "a.tmp",
            "sub/deep/b.tmp",
            "sub/deep/c.txt",
            "cache/drop",
            "cache/keep",
            "x/y/z",
            "x/top",
            "docs/keep.md",
            "docs/other.md",
        ] {
            write(ctx.path(), rel, "");
        }
        write(
            ctx.path(),
            ".dockerignore",
            "*.log\n**/*.tmp\nx/**\ncache\n!cache/keep\n!docs/keep.md\ndocs\n",
        );
        // `COPY . /ctx` of this context with `docker build` (CLI 28.2, classic builder) gave
        // these paths, plus the `cache` directory the engine creates to unpack `cache/keep`.
        assert_eq!(
            names(&build_context(ctx.path(), "Dockerfile").unwrap()),
            [
                ".dockerignore",
                "Dockerfile",
                "cache/keep",
                "sub/",
                "sub/a.log",
                "sub/deep/",
                "sub/deep/c.txt",
                "x/"
            ]
        );
    }

    #[test]
    fn build_context_errors_name_the_ignore_file() {
        let ctx = tempfile::tempdir().unwrap();
        write(ctx.path(), "Dockerfile", "FROM x\n");
        write(ctx.path(), ".dockerignore", "a[\n");
        let err = build_context(ctx.path(), "Dockerfile")
            .unwrap_err()
            .to_string();
        assert!(err.contains(".dockerignore line 1"), "{err}");
    }

    #[test]
    fn pack_dir_names_entries_under_the_target_and_keeps_symlinks() {
        let src = tempfile::tempdir().unwrap();
        write(src.path(), "a/b/file.txt", "hello");
        write(src.path(), "top.sh", "#!/bin/sh");
        symlink("/etc/passwd", src.path().join("link")).unwrap();
        let tar = pack_dir(src.path(), "/logs/verifier/").unwrap();
        assert_eq!(
            listing(&tar),
            [
                (
                    "logs/verifier/a/".to_owned(),
                    tar::EntryType::Directory,
                    None
                ),
                (
                    "logs/verifier/a/b/".to_owned(),
                    tar::EntryType::Directory,
                    None
                ),
                (
                    "logs/verifier/a/b/file.txt".to_owned(),
                    tar::EntryType::Regular,
                    None
                ),
                (
                    "logs/verifier/link".to_owned(),
                    tar::EntryType::Symlink,
                    Some("/etc/passwd".to_owned())
                ),
                (
                    "logs/verifier/top.sh".to_owned(),
                    tar::EntryType::Regular,
                    None
                ),
            ]
        );
        assert_eq!(names(&pack_dir(src.path(), "/").unwrap())[0], "a/");
        set_mtime(&src.path().join("top.sh"), "@7");
        assert_eq!(pack_dir(src.path(), "/logs/verifier").unwrap(), tar);
    }

    #[test]
    fn pack_dir_refuses_relative_or_dotted_targets() {
        let src = tempfile::tempdir().unwrap();
        for target in ["logs", "/logs/../etc", "/a/./b", "/a//b"] {
            let err = pack_dir(src.path(), target).unwrap_err();
            assert!(
                matches!(err, ArchiveError::BadTarget { .. }),
                "{target}: {err}"
            );
        }
    }
}
