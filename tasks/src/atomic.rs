//! Atomic, durable record writes: a record is either absent or whole, never half-written, and
//! once a write returns it survives a crash of the process or the machine (the file and the
//! directory entry that names it are both fsynced).

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` through a temp file in the same directory and a rename, then
/// fsyncs the directory so the rename itself is on disk.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes))
}

/// [`write_atomic`] with the content written by `fill` into the temp file as it is made, so a
/// large record (a job's lock.json lists every trial) is never held whole in memory.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{file_name}.tmp-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let result = (|| {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut file)?;
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    sync_dir(dir)
}

/// Fsyncs the directory `dir`, making the entries created, renamed or removed in it durable
/// (a file's own fsync does not cover the name that points at it).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Renames `from` to `to` and fsyncs both parent directories, so the move is durable.
pub fn rename_durable(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::rename(from, to)?;
    let parent = |p: &Path| {
        p.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let (a, b) = (parent(from), parent(to));
    sync_dir(&b)?;
    if a != b {
        sync_dir(&a)?;
    }
    Ok(())
}

/// Removes the temp files an interrupted [`write_atomic`] left directly in `dir` (a process
/// killed between creating the temp file and the rename); returns how many. Only names of the
/// form `.<file>.tmp-<32 hex>` are touched.
pub fn remove_stale_temps(dir: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_temp = name.starts_with('.')
            && name
                .rsplit_once(".tmp-")
                .is_some_and(|(_, id)| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()));
        if is_temp && entry.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}

/// Serialises `value` as pretty JSON (4-space indent, as Harbor writes) and writes it
/// atomically, streaming it into the file (never a whole copy of the text in memory).
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    write_atomic_with(path, |out| {
        let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut *out, formatter);
        value.serialize(&mut ser).map_err(std::io::Error::other)?;
        out.write_all(b"\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        write_json_atomic(&path, &serde_json::json!({"a": 1})).unwrap();
        write_json_atomic(&path, &serde_json::json!({"b": 2})).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\n    \"b\": 2\n}\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "temp files left behind: {names:?}");
    }

    #[test]
    fn stale_temps_of_an_interrupted_write_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir
            .path()
            .join(format!(".lock.json.tmp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::write(&stale, "half").unwrap();
        for keep in [".hidden", "result.json", ".x.tmp-notanid"] {
            std::fs::write(dir.path().join(keep), "k").unwrap();
        }
        assert_eq!(remove_stale_temps(dir.path()).unwrap(), 1);
        assert!(!stale.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }
}
