//! Compiles `contain/` (root `main.rs`), the verifier jail's helper, into a static executable that the
//! backend embeds and uploads into each jail container. It must be static: it runs with
//! `CAP_SYS_ADMIN` before any container file may be trusted, so it cannot use a container's
//! dynamic loader or libc. Where static linking fails (no `libc.a`), the backend is built
//! without the helper and every trial records that verifier isolation was unavailable.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "contain/main.rs";
    // The directory: a change to any of the helper's modules rebuilds it.
    println!("cargo:rerun-if-changed=contain");
    println!("cargo:rustc-check-cfg=cfg(contain_helper)");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let binary = out.join("contain");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").unwrap_or_default();
    let status = Command::new(rustc)
        .args([
            "--edition",
            "2024",
            "--crate-name",
            "contain",
            "-C",
            "opt-level=2",
            "-C",
            "panic=abort",
            "-C",
            "strip=symbols",
            "-C",
            "target-feature=+crt-static",
            "--target",
            &target,
        ])
        .arg(source)
        .arg("-o")
        .arg(&binary)
        .status();
    match status {
        Ok(status) if status.success() => println!("cargo:rustc-cfg=contain_helper"),
        Ok(status) => println!(
            "cargo:warning=building the static verifier helper failed ({status}); verifier isolation will be unavailable"
        ),
        Err(e) => println!(
            "cargo:warning=cannot run rustc for the static verifier helper ({e}); verifier isolation will be unavailable"
        ),
    }
}
