//! Builds this crate's own binary (`src/main.rs`, the in-container relay) as a static executable
//! and puts it in `OUT_DIR`, where the library (`src/lib.rs`) embeds it. The runner then always
//! carries a relay that matches its bridge and its egress proxy, and no cargo or Rust toolchain
//! is needed when it runs.
//!
//! The relay is std-only, so one plain `rustc` call builds it: no nested cargo (which would
//! fight the outer one for the target-dir lock) and no change to any other crate's flags.
//! `+crt-static` links glibc statically; that is safe because the relay does no DNS or other
//! NSS lookups (it only parses numeric loopback addresses).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let source = manifest_dir.join("src/main.rs");
    println!("cargo:rerun-if-changed={}", source.display());
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("src/peer.rs").display()
    );
    println!("cargo:rerun-if-changed=build.rs");
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("bridge-relay");
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").expect("cargo sets TARGET");
    if !target.contains("linux") {
        panic!("the bridge relay is built for Linux task containers; target {target} is not Linux");
    }
    let status = Command::new(&rustc)
        .args([
            "--edition=2024",
            "--crate-type=bin",
            "--crate-name=bridge_relay",
        ])
        .args([
            "-C",
            "opt-level=s",
            "-C",
            "panic=abort",
            "-C",
            "codegen-units=1",
        ])
        .args(["-C", "strip=symbols", "-C", "target-feature=+crt-static"])
        .args(["--target", &target])
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .env(
            "CARGO_PKG_VERSION",
            env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        )
        .status()
        .unwrap_or_else(|error| panic!("cannot run {rustc:?} to build the bridge relay: {error}"));
    if !status.success() {
        panic!(
            "building the static bridge relay from {} failed ({status}); `rustc --target {target} -C target-feature=+crt-static` must work here",
            source.display()
        );
    }
}
