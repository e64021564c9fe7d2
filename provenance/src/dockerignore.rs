//! `.dockerignore` rules for image build contexts, evaluated as Docker evaluates them.
//!
//! Docker's rules (the `docker build` reference, "dockerignore file"):
//! - one pattern a line; a line starting with `#` is a comment; surrounding whitespace is
//!   trimmed; a leading `!` makes the line an exception (it takes entries back);
//! - every pattern is anchored at the context root (`*.log` is only the root's logs,
//!   `**/*.log` every log); `foo/` means the same as `foo`; the pattern is cleaned like Go's
//!   `filepath.Clean` (`a/./b`, `a//b` → `a/b`) and a leading `/` is dropped;
//! - a pattern that matches a directory matches everything below it;
//! - for each path the *last* pattern that matches it or one of its parent directories
//!   decides: excluded unless that pattern is an exception;
//! - the Dockerfile and `.dockerignore` are always sent (the engine needs them), whatever the
//!   patterns say; `<Dockerfile path>.dockerignore` (`Dockerfile.dockerignore`, or
//!   `docker/Dockerfile.main.dockerignore` for a build naming `docker/Dockerfile.main`), when
//!   present, replaces `.dockerignore`, and is sent too.
//!
//! Each pattern's glob is matched by the `ignore` crate's gitignore matcher, anchored at the
//! root (so gitignore's match-at-any-depth rule never applies). Where that glob syntax differs
//! from Go's `filepath.Match` plus Docker's `**`:
//! - `**` is special only as a whole path component (`**/x`, `x/**`, `a/**/b`), as Docker
//!   uses it; elsewhere (`a**b`) it is an ordinary `*` here, where Docker reads it as "any
//!   number of directories" (`ab`, `a/x/b`, but not `axb`);
//! - `x/**` matches what is inside `x` but not `x` itself (as in Docker);
//! - character classes accept both `[!a]` and `[^a]`; an unclosed `[` is an error naming the
//!   file and line, as in Docker.
//!
//! An excluded directory is still walked when an exception pattern exists, so `dir` followed
//! by `!dir/keep` sends `dir/keep` (as BuildKit does); the directory's own entry is left out,
//! and the engine creates it when it unpacks `dir/keep`.

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::error::ArchiveError;
use crate::walk::Exclusions;

/// The ignore file every context may have; a Dockerfile's own one replaces it.
const CONTEXT_IGNORE: &str = ".dockerignore";

/// The compiled patterns of one `.dockerignore` file, and the files sent whatever they say.
#[derive(Debug, Clone, Default)]
pub struct DockerIgnore {
    patterns: Vec<Pattern>,
    /// Context-relative paths never excluded: the Dockerfile and the ignore files.
    always_sent: Vec<String>,
}

/// One pattern line.
#[derive(Debug, Clone)]
struct Pattern {
    /// The line as written (trimmed), for the summary.
    written: String,
    /// An exception (`!`): a match takes the entry back.
    exception: bool,
    /// The cleaned, anchored glob.
    matcher: Gitignore,
}

impl DockerIgnore {
    /// The rules of the build context `dir` for a build of `dockerfile` (its path relative to
    /// `dir`, `/`-separated): `<dockerfile>.dockerignore` if it exists, else `.dockerignore`,
    /// else none (everything is sent).
    pub fn for_build(dir: &Path, dockerfile: &str) -> Result<Self, ArchiveError> {
        let own = format!("{dockerfile}.dockerignore");
        let always_sent = vec![
            dockerfile.to_owned(),
            CONTEXT_IGNORE.to_owned(),
            own.clone(),
        ];
        for name in [own.as_str(), CONTEXT_IGNORE] {
            let path = dir.join(name);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    let text = String::from_utf8(bytes).map_err(|_| {
                        ArchiveError::io(&path, std::io::Error::other("the file is not UTF-8"))
                    })?;
                    let mut rules = Self::parse(&text, &path)?;
                    rules.always_sent = always_sent;
                    return Ok(rules);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(ArchiveError::io(&path, e)),
            }
        }
        Ok(Self::default())
    }

    /// Parses the text of an ignore file; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ArchiveError> {
        let mut patterns = Vec::new();
        for (index, line) in text.lines().enumerate() {
            // As Docker: the comment test comes before trimming.
            if line.starts_with('#') {
                continue;
            }
            let written = line.trim();
            let (exception, glob) = match written.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, written),
            };
            let Some(glob) = clean(glob) else {
                continue;
            };
            let bad = |message: String| ArchiveError::BadPattern {
                path: origin.to_path_buf(),
                line: index + 1,
                pattern: written.to_owned(),
                message,
            };
            // Relative to ".", so the matcher never strips a prefix from the paths it is asked
            // about; the leading "/" anchors the glob at the root.
            let mut builder = GitignoreBuilder::new(".");
            // Go's filepath.Match refuses an unclosed `[`; gitignore would take it literally.
            builder.allow_unclosed_class(false);
            builder
                .add_line(None, &format!("/{glob}"))
                .map_err(|e| bad(e.to_string()))?;
            let matcher = builder.build().map_err(|e| bad(e.to_string()))?;
            patterns.push(Pattern {
                written: written.to_owned(),
                exception,
                matcher,
            });
        }
        Ok(Self {
            patterns,
            always_sent: vec!["Dockerfile".to_owned(), CONTEXT_IGNORE.to_owned()],
        })
    }

    /// The pattern that decides `rel_path`, if that pattern excludes it (see the module docs).
    fn deciding_exclusion(&self, rel_path: &str, is_dir: bool) -> Option<&Pattern> {
        if self.always_sent.iter().any(|sent| sent == rel_path) {
            return None;
        }
        self.patterns
            .iter()
            .rev()
            .find(|p| {
                p.matcher
                    .matched_path_or_any_parents(rel_path, is_dir)
                    .is_ignore()
            })
            .filter(|p| !p.exception)
    }

    /// True when `rel_path` ('/'-separated, relative to the context root) is left out of the
    /// build context.
    pub fn excludes(&self, rel_path: &str, is_dir: bool) -> bool {
        self.deciding_exclusion(rel_path, is_dir).is_some()
    }
}

impl Exclusions for DockerIgnore {
    fn excluding_rule(&self, rel_path: &str, is_dir: bool) -> Option<String> {
        self.deciding_exclusion(rel_path, is_dir)
            .map(|p| p.written.clone())
    }

    fn may_reinclude_below(&self, rel_dir: &str) -> bool {
        // An excluded directory is walked when an exception may take something back, or when
        // it holds a file always sent (a named Dockerfile in an excluded `docker/`).
        self.patterns.iter().any(|p| p.exception)
            || self.always_sent.iter().any(|sent| {
                sent.strip_prefix(rel_dir)
                    .is_some_and(|rest| rest.starts_with('/'))
            })
    }

    fn rules(&self) -> Vec<String> {
        self.patterns.iter().map(|p| p.written.clone()).collect()
    }
}

/// A pattern cleaned as Go's `filepath.Clean` cleans it, without its leading `/`; `None` for a
/// pattern that can match no entry (empty, `.` or `/`).
fn clean(glob: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in glob.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            // A leading `..` of an absolute pattern stays at the root, as in Go.
            ".." if glob.starts_with('/') => {}
            _ => parts.push(part),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> DockerIgnore {
        DockerIgnore::parse(text, Path::new(".dockerignore")).unwrap()
    }

    #[test]
    fn patterns_are_anchored_at_the_root() {
        let ignore = rules("*.log\n**/*.tmp\n/build/\nsub/./x//y\n");
        assert!(ignore.excludes("a.log", false));
        assert!(!ignore.excludes("sub/a.log", false), "only the root's logs");
        assert!(ignore.excludes("a.tmp", false));
        assert!(ignore.excludes("deep/er/a.tmp", false));
        assert!(ignore.excludes("build", true));
        assert!(ignore.excludes("build/out/bin", false), "below a match");
        assert!(
            ignore.excludes("sub/x/y", false),
            "cleaned like filepath.Clean"
        );
        assert!(!ignore.excludes("src/build", true));
    }

    #[test]
    fn the_last_matching_pattern_decides() {
        let ignore = rules("docs\n!docs/keep.md\n");
        assert!(ignore.excludes("docs", true));
        assert!(ignore.excludes("docs/other.md", false));
        assert!(!ignore.excludes("docs/keep.md", false));
        assert!(ignore.may_reinclude_below("docs"));
        // An exception before a broader exclusion is overridden by it, as in Docker.
        let ignore = rules("!docs/keep.md\ndocs\n");
        assert!(ignore.excludes("docs/keep.md", false));
    }

    #[test]
    fn comments_blanks_and_always_sent_files() {
        let ignore = rules("# a comment\n\n   \n*\n.\n");
        assert!(ignore.excludes("anything", false));
        assert!(!ignore.excludes("Dockerfile", false));
        assert!(!ignore.excludes(".dockerignore", false));
        assert!(!ignore.may_reinclude_below("anything"));
        assert_eq!(ignore.rules(), ["*"]);
    }

    #[test]
    fn a_bad_pattern_names_file_and_line() {
        let err = DockerIgnore::parse("ok\nbad[\n", Path::new("/ctx/.dockerignore"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/ctx/.dockerignore line 2") && err.contains("`bad[`"),
            "{err}"
        );
    }

    #[test]
    fn clean_matches_go() {
        assert_eq!(clean("/a/b/").as_deref(), Some("a/b"));
        assert_eq!(clean("a/../b").as_deref(), Some("b"));
        assert_eq!(clean("../x").as_deref(), Some("../x"));
        assert_eq!(clean("/../x").as_deref(), Some("x"));
        assert_eq!(clean("."), None);
        assert_eq!(clean("/"), None);
    }
}
