//! Reading files the agent may have written, without trusting them: no symlinks followed
//! (a link could point anywhere on the host), and never more than a stated number of bytes.

use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

/// The largest JSON record parsed (result.json, config.json); larger ones are reported, not
/// read. Real records are a few KiB. The same cap as every other reader of records.
pub const MAX_RECORD_BYTES: u64 = tasks::bounded::MAX_RECORD_BYTES;

/// The largest trajectory parsed and rendered; larger ones get a link instead.
pub const MAX_TRAJECTORY_BYTES: u64 = 32 << 20;

/// How much of a log is shown inline before a link to the whole file.
pub const LOG_HEAD_BYTES: usize = 64 << 10;

/// The path of `rel` under `base` if every component below `base` is a real directory or,
/// for the last one, a regular file: never through a symlink.
pub fn regular_file(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut path = base.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        if Path::new(part)
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            return None;
        }
        path.push(part);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        let last = i + 1 == parts.len();
        if (last && !meta.is_file()) || (!last && !meta.is_dir()) {
            return None;
        }
    }
    Some(path)
}

/// The start of a text file, lossily decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// Up to the byte limit, invalid UTF-8 replaced.
    pub text: String,
    /// The file's size.
    pub total_bytes: u64,
    /// Whether `text` is only the start.
    pub truncated: bool,
}

/// The first `limit` bytes of `path`.
pub fn read_head(path: &Path, limit: usize) -> std::io::Result<Head> {
    let file = std::fs::File::open(path)?;
    let total_bytes = file.metadata()?.len();
    let mut bytes = Vec::with_capacity(limit.min(total_bytes as usize));
    file.take(limit as u64).read_to_end(&mut bytes)?;
    Ok(Head {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        total_bytes,
        truncated: total_bytes > bytes.len() as u64,
    })
}

/// What reading a JSON record gave.
#[derive(Debug)]
pub enum Json {
    /// No such regular file.
    Absent,
    /// Larger than the limit: not read; the message names the limit.
    TooLarge(String),
    /// Unreadable or not JSON: what went wrong.
    Invalid(String),
    /// The parsed value.
    Value(serde_json::Value),
}

/// Reads `rel` under `base` as JSON when it is a regular file of at most `limit` bytes
/// (through the records' one reader, `tasks::records::read`).
pub fn read_json(base: &Path, rel: &str, limit: u64) -> Json {
    let Some(path) = regular_file(base, rel) else {
        return Json::Absent;
    };
    match tasks::records::read::read_json_capped(&path, limit, rel) {
        Ok(None) => Json::Absent,
        Ok(Some(value)) => Json::Value(value),
        Err(e) if e.is_too_large() => Json::TooLarge(error_text(e)),
        Err(e) => Json::Invalid(error_text(e)),
    }
}

/// The error's own words, without the path (the viewer names the file itself).
fn error_text(error: tasks::records::read::RecordError) -> String {
    use tasks::records::read::RecordError;
    match error {
        RecordError::Unreadable { source, .. } => source.to_string(),
        RecordError::Malformed { problem, .. } => problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("secret.txt");
        std::fs::write(&outside, "host secret").unwrap();
        let trial = dir.path().join("trial");
        std::fs::create_dir_all(trial.join("agent")).unwrap();
        std::os::unix::fs::symlink(&outside, trial.join("agent/trajectory.json")).unwrap();
        std::os::unix::fs::symlink(dir.path(), trial.join("verifier")).unwrap();
        std::fs::write(trial.join("trial.log"), "ok").unwrap();
        assert_eq!(regular_file(&trial, "agent/trajectory.json"), None);
        assert_eq!(regular_file(&trial, "verifier/secret.txt"), None);
        assert_eq!(regular_file(&trial, "../secret.txt"), None);
        assert_eq!(
            regular_file(&trial, "trial.log"),
            Some(trial.join("trial.log"))
        );
        assert!(matches!(
            read_json(&trial, "agent/trajectory.json", MAX_RECORD_BYTES),
            Json::Absent
        ));
    }

    #[test]
    fn heads_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "héllo world").unwrap();
        let head = read_head(&path, 2).unwrap();
        // The cut splits `é`: the partial byte is replaced, not a panic.
        assert_eq!(head.text, "h\u{fffd}");
        assert!(head.truncated);
        assert_eq!(head.total_bytes, 12);
        assert!(!read_head(&path, 100).unwrap().truncated);
        std::fs::write(dir.path().join("big.json"), "[1, 2, 3]").unwrap();
        assert!(matches!(
            read_json(dir.path(), "big.json", 4),
            Json::TooLarge(why) if why.contains("4 bytes limit")
        ));
        std::fs::write(dir.path().join("bad.json"), "{").unwrap();
        assert!(matches!(
            read_json(dir.path(), "bad.json", 100),
            Json::Invalid(_)
        ));
    }
}
