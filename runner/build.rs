//! Records the git commit the runner is built from (for lock.json and `--version`) and the
//! build's target and profile.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("cargo:rustc-env=RUNNER_GIT_COMMIT={commit}");
    let shown = if commit.is_empty() {
        "unknown"
    } else {
        &commit
    };
    println!("cargo:rustc-env=RUNNER_GIT_COMMIT_SHOWN={shown}");
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=RUNNER_BUILD_TARGET={target}");
    let profile = std::env::var("PROFILE").unwrap_or_default();
    println!("cargo:rustc-env=RUNNER_BUILD_PROFILE={profile}");
    // Rebuild when HEAD moves; a directory is scanned for any change.
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/refs/heads");
}
