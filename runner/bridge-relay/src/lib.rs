//! The in-container relay binary (this crate's `src/main.rs`), embedded at build time (see
//! `build.rs`), and the command lines that drive it.
//!
//! The runner puts it into each trial's socket directory (one bind mount then gives the
//! container both the socket and the relay), starts it detached with [`relay_serve_command`],
//! and waits for it with [`relay_wait_command`] before it starts the agent. The LLM bridge and
//! the engine's egress proxy both use it; it sits below both so neither depends on the other.

use std::io;
use std::path::Path;

/// The static `bridge-relay` executable for the build target (x86_64 Linux here).
pub const RELAY_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bridge-relay"));

/// The relay's file name inside a trial's socket directory.
pub const RELAY_FILE_NAME: &str = "bridge-relay";

/// Writes the relay to `path` (mode 0755) via a temp file and rename, so a concurrent reader
/// never sees half an executable.
pub fn write_relay(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    io::Write::write_all(&mut temp, RELAY_BINARY)?;
    temp.as_file().sync_all()?;
    temp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o755))?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The command that starts the relay in the container (run it detached).
pub fn relay_serve_command(
    relay_in_container: &str,
    socket_in_container: &str,
    port: u16,
) -> Vec<String> {
    vec![
        relay_in_container.to_owned(),
        "serve".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--socket".into(),
        socket_in_container.to_owned(),
    ]
}

/// The command that returns once the relay listens (exit 0), or fails after `timeout_ms`.
pub fn relay_wait_command(relay_in_container: &str, port: u16, timeout_ms: u64) -> Vec<String> {
    vec![
        relay_in_container.to_owned(),
        "wait".into(),
        "--addr".into(),
        format!("127.0.0.1:{port}"),
        "--timeout-ms".into(),
        timeout_ms.to_string(),
    ]
}

/// The command that tells the bridge, through the relay at `port`, that the agent's turn has
/// ended (`POST /runner/end-turn` with the trial's token) and returns once it has paused.
pub fn relay_end_turn_command(relay_in_container: &str, port: u16, token: &str) -> Vec<String> {
    vec![
        relay_in_container.to_owned(),
        "end-turn".into(),
        "--addr".into(),
        format!("127.0.0.1:{port}"),
        "--token".into(),
        token.to_owned(),
    ]
}

/// The path of the in-band end of an agent turn (see [`relay_end_turn_command`]).
pub const END_TURN_PATH: &str = "/runner/end-turn";

/// True when an ELF executable has no program interpreter, i.e. it is statically linked and
/// runs on an image without a dynamic loader or libc.
pub fn elf_is_static(binary: &[u8]) -> bool {
    // A static-pie executable still has PT_DYNAMIC (it relocates itself); only an
    // interpreter means it needs ld.so and a libc from the image.
    const PT_INTERP: u32 = 3;
    let is_elf64 =
        binary.len() > 64 && &binary[..4] == b"\x7fELF" && binary[4] == 2 && binary[5] == 1;
    if !is_elf64 {
        return false;
    }
    let u16_at = |at: usize| u16::from_le_bytes([binary[at], binary[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(binary[32..40].try_into().expect("8 bytes")) as usize;
    let (entry_size, count) = (u16_at(54), u16_at(56));
    (0..count).all(|i| {
        let at = phoff + i * entry_size;
        match binary.get(at..at + 4) {
            Some(bytes) => {
                let kind = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
                kind != PT_INTERP
            }
            None => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_relay_is_a_static_executable() {
        assert!(
            elf_is_static(RELAY_BINARY),
            "the embedded relay needs a dynamic loader"
        );
        // A dynamically linked program of this machine is told apart.
        let dynamic = std::fs::read("/bin/sh").unwrap();
        assert!(!elf_is_static(&dynamic));
    }

    #[test]
    fn the_written_relay_runs_and_reports_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RELAY_FILE_NAME);
        write_relay(&path).unwrap();
        let output = std::process::Command::new(&path)
            .arg("--version")
            .output()
            .unwrap();
        assert!(output.status.success());
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            format!("bridge-relay {}", env!("CARGO_PKG_VERSION"))
        );
    }
}
