//! Finding an agent's own log under `agent/traces/` by a pattern: its name holds a session id
//! or a date (`projects/*/*.jsonl`, `sessions/*/*/*/rollout-*.jsonl`). `*` matches any run of
//! characters within one path segment; links are never followed (the traces came out of the
//! agent's container).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The most recently modified file under `root` matching `pattern`.
pub fn newest_match(root: &Path, pattern: &str) -> Option<PathBuf> {
    let segments: Vec<&str> = pattern.split('/').collect();
    let mut found = Vec::new();
    walk(root, &segments, &mut found);
    found
        .into_iter()
        .max_by_key(|(modified, path)| (*modified, path.clone()))
        .map(|(_, path)| path)
}

fn walk(dir: &Path, segments: &[&str], found: &mut Vec<(SystemTime, PathBuf)>) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !matches(first, name) {
            continue;
        }
        if rest.is_empty() && kind.is_file() {
            let modified = entry.metadata().and_then(|m| m.modified());
            found.push((modified.unwrap_or(SystemTime::UNIX_EPOCH), entry.path()));
        } else if !rest.is_empty() && kind.is_dir() {
            walk(&entry.path(), rest, found);
        }
    }
}

/// Whether `name` matches `pattern`, where `*` is any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_matches_within_one_segment() {
        assert!(matches("*.jsonl", "abc.jsonl"));
        assert!(matches(
            "rollout-*.jsonl",
            "rollout-2026-12-07T03-36-13-01a2.jsonl"
        ));
        assert!(!matches("rollout-*.jsonl", "session.jsonl"));
        assert!(matches("*", "x"));
        assert!(!matches("a*b*c", "acb"));
        assert!(matches("a*b*c", "aXbYc"));
        assert!(!matches("ab*ba", "aba"), "the two ends may not overlap");
    }

    #[test]
    fn the_newest_file_at_the_patterns_depth_is_found_and_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("projects/-app/sub")).unwrap();
        std::fs::write(root.join("projects/-app/old.jsonl"), "1").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(root.join("projects/-app/new.jsonl"), "2").unwrap();
        std::fs::write(root.join("projects/-app/sub/deeper.jsonl"), "3").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("projects/linked")).unwrap();
        let found = newest_match(root, "projects/*/*.jsonl").unwrap();
        assert_eq!(found, root.join("projects/-app/new.jsonl"));
        assert_eq!(newest_match(root, "projects/*/*.json"), None);
        assert_eq!(newest_match(root, "projects/linked/*"), None);
    }
}
