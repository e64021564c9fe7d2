//! The tests' own `/`: a tmpfs in their private mount namespace whose top level is the
//! trial's (each directory bound in with everything mounted under it, files bound, links
//! copied), except the links the image has there and pytest configuration files.
//!
//! Why: a merged-`/usr` image reaches `/bin/bash` (every `#!/bin/bash`) and the loader through
//! top-level links (`/bin -> usr/bin`, `/lib64 -> usr/lib64`). A link cannot be made a mount
//! point, so in the trial's `/` the agent could point it elsewhere at any moment; in this root
//! the links are the image's and nothing of the agent's can reach them. pytest takes `/` as
//! its rootdir when a configuration file sits there, and then loads a `/conftest.py`: neither
//! is the task's unless the image has it.
//!
//! The tmpfs is mounted on `/tests` (the one directory the helper may cover), the tests go in
//! its `tests/`, and the test command is started with this root (`launch.rs`).

use super::*;

/// Where the tests' root is mounted in the helper's view, and their tests in it.
pub(crate) const ROOT: &str = "/tests";
pub(crate) const TESTS_IN_ROOT: &str = "/tests/tests";

/// What the image has at its top level that the tests' root takes from it: its links, and
/// clones of its pytest configuration files (read in the jail's namespace).
pub(crate) struct ImageTop {
    pub links: Vec<(String, PathBuf)>,
    pub configs: Vec<(String, std::os::fd::OwnedFd)>,
}

/// The image's top-level links, by name. Runs in the jail's own namespace (its root is the
/// image as built).
pub(crate) fn image_links() -> Vec<(String, PathBuf)> {
    let mut links = Vec::new();
    if let Ok(entries) = fs::read_dir("/") {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Ok(target) = fs::read_link(format!("/{name}")) {
                links.push((name, target));
            }
        }
    }
    links.sort();
    links
}

/// Builds the tests' root on `/tests` and their own `/tests` inside it (what differs from the
/// image at the top level is recorded by `toolchain::plan`). Runs in the tests' private
/// namespace, after the private `/logs/verifier` is mounted (so the bound `/logs` carries it).
pub(crate) fn build(image: ImageTop, tests_bytes: u64) -> Result<(), Failure> {
    let unavailable = |what: &str, e: io::Error| Failure::Unavailable(format!("{what}: {e}"));
    let mut names: Vec<String> = fs::read_dir("/")
        .map_err(|e| unavailable("listing /", e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    mount(
        Some("runner-root"),
        ROOT,
        Some("tmpfs"),
        sys::MS_NOSUID | sys::MS_NODEV,
        Some("size=16m,mode=0755"),
    )
    .map_err(|e| unavailable("mounting the tests' root", e))?;
    for name in names.iter().filter(|n| n.as_str() != "tests") {
        let (from, to) = (format!("/{name}"), format!("{ROOT}/{name}"));
        if image.links.iter().any(|(n, _)| n == name) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&from) else {
            continue;
        };
        let bound = if meta.is_dir() {
            fs::create_dir(&to)
                .and_then(|()| mount(Some(&from), &to, None, sys::MS_BIND | sys::MS_REC, None))
        } else if meta.file_type().is_symlink() {
            fs::read_link(&from).and_then(|target| std::os::unix::fs::symlink(target, &to))
        } else if meta.is_file() {
            // Recorded by the plan (`toolchain::plan_configs`); the image's own goes in below.
            if PYTEST_CONFIGS.contains(&name.as_str()) {
                continue;
            }
            File::create(&to).and_then(|_| mount(Some(&from), &to, None, sys::MS_BIND, None))
        } else {
            continue;
        };
        bound.map_err(|e| unavailable(&format!("putting {from} into the tests' root"), e))?;
    }
    for (name, target) in &image.links {
        std::os::unix::fs::symlink(target, format!("{ROOT}/{name}"))
            .map_err(|e| unavailable(&format!("the image's link /{name}"), e))?;
    }
    for (name, clone) in image.configs {
        let to = format!("{ROOT}/{name}");
        File::create(&to)
            .and_then(|_| pins::attach(&clone, &to))
            .map_err(|e| unavailable(&format!("the image's /{name}"), e))?;
    }
    fs::create_dir(TESTS_IN_ROOT).map_err(|e| unavailable("making the tests' /tests", e))?;
    let data = format!("size={tests_bytes},mode=0755");
    mount(
        Some("runner-verifier"),
        TESTS_IN_ROOT,
        Some("tmpfs"),
        sys::MS_NOSUID | sys::MS_NODEV,
        Some(&data),
    )
    .map_err(|e| unavailable("mounting a private /tests", e))?;
    Ok(())
}
