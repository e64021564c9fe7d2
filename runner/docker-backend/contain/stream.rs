//! The results of a warm jail go back over its stdout as a tar stream, instead of being
//! downloaded from the stopped jail: an archive call to the engine costs about as much as the
//! tests of a quick task (it mounts the container's root again and forks a tar process), and
//! it waited for the jail's exit besides. The stdout is the runner's attached stream; no
//! process of the trial can write to it (its `/proc/<pid>/fd/1` needs the same ptrace access
//! as the helper's root, see `jail/warm.rs`), and the tests' own output never goes there
//! (`launch.rs` gives them stdin from `/dev/null` and stdout on stderr).
//!
//! The writer is hand-made because the helper is std-only (see `main.rs`): ustar headers, a
//! PAX `path` record for names longer than ustar holds, directories and regular files only
//! (all `/.runner/out` holds: the helper wrote it, and its copy skips everything else).

use super::*;

use std::io::Write;

const BLOCK: usize = 512;

/// Writes `dir`'s tree as a tar whose entries are under `top/`, then the end-of-archive
/// blocks. Entries come sorted, so the stream is the same for the same tree.
pub(crate) fn write_tree(dir: &Path, top: &str, out: &mut dyn Write) -> io::Result<()> {
    header(out, top, 0o755, 0, b'5')?;
    write_dir(dir, top, out)?;
    out.write_all(&[0u8; 2 * BLOCK])?;
    out.flush()
}

fn write_dir(dir: &Path, shown: &str, out: &mut dyn Write) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let path = entry.path();
        let shown = format!("{shown}/{name}");
        let meta = fs::symlink_metadata(&path)?;
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            header(out, &shown, mode, 0, b'5')?;
            write_dir(&path, &shown, out)?;
        } else if meta.is_file() {
            let size = meta.len();
            header(out, &shown, mode, size, b'0')?;
            let copied = io::copy(&mut File::open(&path)?.take(size), out)?;
            if copied != size {
                return Err(io::Error::other(format!(
                    "{shown} changed while being sent"
                )));
            }
            pad(out, size)?;
        }
    }
    Ok(())
}

/// One entry's header; a PAX record before it when the path does not fit ustar's name field.
fn header(out: &mut dyn Write, path: &str, mode: u32, size: u64, kind: u8) -> io::Result<()> {
    let name = if kind == b'5' {
        format!("{path}/")
    } else {
        path.to_owned()
    };
    if name.len() > 100 {
        let record = pax_record("path", &name);
        out.write_all(&ustar_block("pax", 0o644, record.len() as u64, b'x'))?;
        out.write_all(record.as_bytes())?;
        pad(out, record.len() as u64)?;
        let cut: String = name.chars().take(99).collect();
        return out.write_all(&ustar_block(&cut, mode, size, kind));
    }
    out.write_all(&ustar_block(&name, mode, size, kind))
}

/// A PAX extended-header record: `<length> <key>=<value>\n`, the length counting itself.
pub(crate) fn pax_record(key: &str, value: &str) -> String {
    let rest = key.len() + value.len() + 3; // the space, '=' and '\n'
    let mut length = rest + 1;
    while (length.to_string().len() + rest) != length {
        length = length.to_string().len() + rest;
    }
    format!("{length} {key}={value}\n")
}

/// A ustar header block. `name` is at most 100 bytes (the caller sees to it).
pub(crate) fn ustar_block(name: &str, mode: u32, size: u64, kind: u8) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    let mut put = |at: usize, bytes: &[u8]| block[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &name.as_bytes()[..name.len().min(100)]);
    put(100, format!("{mode:07o}\0").as_bytes());
    put(108, b"0000000\0"); // uid
    put(116, b"0000000\0"); // gid
    put(124, format!("{size:011o}\0").as_bytes());
    put(136, b"00000000000\0"); // mtime: the stream carries no clock
    put(148, b"        "); // the checksum counts its own field as spaces
    put(156, &[kind]);
    put(257, b"ustar\0");
    put(263, b"00");
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    block
}

/// Zeros up to the next block boundary after `size` bytes.
fn pad(out: &mut dyn Write, size: u64) -> io::Result<()> {
    let rest = (BLOCK - (size % BLOCK as u64) as usize) % BLOCK;
    out.write_all(&[0u8; BLOCK][..rest])
}
