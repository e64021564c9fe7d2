//! Git state of a source tree, read by shelling out to `git` for its exact CLI semantics:
//! commit, branch, describe, and dirty-state counts. Never diffs, contents or untracked names.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// Counts from `git status --porcelain=v2`, limited to the source directory.
///
/// One path can count in several buckets (staged and modified, staged and deleted).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct DirtyCounts {
    /// Entries with an index change (X != '.').
    pub staged: u64,
    /// Entries changed in the work tree other than deletions (Y not '.' or 'D').
    pub modified: u64,
    /// Untracked files (`?`), directories expanded.
    pub untracked: u64,
    /// Entries deleted in the index or the work tree (X or Y is 'D').
    pub deleted: u64,
    /// Unmerged entries (`u`).
    pub unmerged: u64,
}

impl DirtyCounts {
    /// True when anything at all differs from HEAD, untracked files included (unlike
    /// `git describe --dirty`, which ignores them).
    pub fn is_dirty(&self) -> bool {
        self.staged + self.modified + self.untracked + self.deleted + self.unmerged > 0
    }

    /// A short human summary, e.g. `2 staged, 1 untracked`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = [
            (self.staged, "staged"),
            (self.modified, "modified"),
            (self.untracked, "untracked"),
            (self.deleted, "deleted"),
            (self.unmerged, "unmerged"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if parts.is_empty() {
            "clean".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What git says about the source directory.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct GitState {
    /// HEAD's commit id; `None` before the first commit.
    pub commit: Option<String>,
    /// The branch name; `None` when HEAD is detached.
    pub branch: Option<String>,
    /// `git describe --tags --always`, with `-dirty` appended when `dirty` is true.
    pub describe: Option<String>,
    /// HEAD's tree id.
    pub head_tree: Option<String>,
    /// `origin`'s URL with any user info and query removed.
    pub remote_url: Option<String>,
    /// Dirty-state counts.
    pub counts: DirtyCounts,
    /// `counts.is_dirty()`, spelled out for readers of the record.
    pub dirty: bool,
}

/// Why the git state is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitUnavailable {
    /// The directory is not inside a git work tree.
    NotARepository,
    /// The `git` program could not be run.
    GitMissing(String),
    /// git ran but failed.
    Failed(String),
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitUnavailable> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        // A repo's config must not run programs while we only read its state.
        .args(["-c", "core.fsmonitor=false", "-c", "core.quotepath=off"])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| GitUnavailable::GitMissing(e.to_string()))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(GitUnavailable::Failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ))
    }
}

fn git_line(dir: &Path, args: &[&str]) -> Option<String> {
    let out = git(dir, args).ok()?;
    let line = String::from_utf8_lossy(&out).trim().to_owned();
    (!line.is_empty()).then_some(line)
}

/// Reads the git state of `dir` (status limited to `dir` and below).
pub fn git_state(dir: &Path) -> Result<GitState, GitUnavailable> {
    match git(dir, &["rev-parse", "--is-inside-work-tree"]) {
        Ok(out) if String::from_utf8_lossy(&out).trim() == "true" => {}
        Ok(_) => return Err(GitUnavailable::NotARepository),
        Err(GitUnavailable::Failed(msg)) if msg.contains("not a git repository") => {
            return Err(GitUnavailable::NotARepository);
        }
        Err(e) => return Err(e),
    }
    let status = git(
        dir,
        &[
            "status",
            "--porcelain=v2",
            "-z",
            "--branch",
            "--untracked-files=all",
            "--",
            ".",
        ],
    )?;
    let mut state = parse_porcelain_v2(&status);
    // `--dirty` would judge the whole repository and ignore untracked files; the suffix
    // follows our own flag instead, scoped to the source directory like the counts.
    state.describe = git_line(dir, &["describe", "--tags", "--always"])
        .map(|d| if state.dirty { format!("{d}-dirty") } else { d });
    state.head_tree = git_line(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{tree}"]);
    state.remote_url =
        git_line(dir, &["remote", "get-url", "origin"]).map(|u| strip_credentials(&u));
    Ok(state)
}

/// Parses `git status --porcelain=v2 -z --branch` output into commit, branch and counts.
pub fn parse_porcelain_v2(out: &[u8]) -> GitState {
    let mut state = GitState::default();
    let mut records = out.split(|b| *b == 0).filter(|r| !r.is_empty());
    while let Some(record) = records.next() {
        let line = String::from_utf8_lossy(record);
        let mut fields = line.splitn(3, ' ');
        let tag = fields.next().unwrap_or_default();
        let second = fields.next().unwrap_or_default();
        match tag {
            "#" => {
                let value = fields.next().unwrap_or_default().to_owned();
                match second {
                    "branch.oid" if value != "(initial)" => state.commit = Some(value),
                    "branch.head" if value != "(detached)" => state.branch = Some(value),
                    _ => {}
                }
            }
            "1" | "2" => {
                let xy = second.as_bytes();
                let (x, y) = (
                    xy.first().copied().unwrap_or(b'.'),
                    xy.get(1).copied().unwrap_or(b'.'),
                );
                if x != b'.' {
                    state.counts.staged += 1;
                }
                if y != b'.' && y != b'D' {
                    state.counts.modified += 1;
                }
                if x == b'D' || y == b'D' {
                    state.counts.deleted += 1;
                }
                if tag == "2" {
                    // With -z a rename's original path is the next NUL-terminated record.
                    records.next();
                }
            }
            "u" => state.counts.unmerged += 1,
            "?" => state.counts.untracked += 1,
            _ => {}
        }
    }
    state.dirty = state.counts.is_dirty();
    state
}

/// Removes `user:password@` and any query or fragment from a remote URL.
pub fn strip_credentials(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or(url);
    if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, path) = rest
            .split_once('/')
            .map_or((rest, None), |(a, p)| (a, Some(p)));
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        match path {
            Some(path) => format!("{scheme}://{host}/{path}"),
            None => format!("{scheme}://{host}"),
        }
    } else {
        // scp-like `git@host:path`: the user part names an account, not a secret, but a
        // `user:token@` form would be one, so keep only what follows the last '@'.
        url.rsplit_once('@')
            .map_or(url.to_owned(), |(_, rest)| rest.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_user_info_and_query() {
        assert_eq!(
            strip_credentials("https://user:ghp_x@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            strip_credentials("https://github.com/o/r.git?token=abc"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            strip_credentials("git@github.com:o/r.git"),
            "github.com:o/r.git"
        );
        assert_eq!(
            strip_credentials("https://github.com"),
            "https://github.com"
        );
    }

    #[test]
    fn parses_porcelain_records() {
        let out = b"# branch.oid abc\0# branch.head main\0\
1 .M N... 100644 100644 100644 h1 h1 a.txt\0\
1 M. N... 100644 100644 100644 h1 h2 b.txt\0\
1 D. N... 100644 000000 000000 h1 h0 gone.txt\0\
2 R. N... 100644 100644 100644 h1 h1 R100 new.txt\0old.txt\0\
u UU N... 100644 100644 100644 100644 h1 h2 h3 c.txt\0\
? x y.txt\0";
        let state = parse_porcelain_v2(out);
        assert_eq!(state.commit.as_deref(), Some("abc"));
        assert_eq!(state.branch.as_deref(), Some("main"));
        assert_eq!(
            state.counts,
            DirtyCounts {
                staged: 3,
                modified: 1,
                untracked: 1,
                deleted: 1,
                unmerged: 1
            }
        );
        assert!(state.dirty);
    }
}
