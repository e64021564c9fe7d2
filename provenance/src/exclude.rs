//! Exclude rules: default directory names matched as path components, plus user globs.

use std::collections::BTreeMap;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Serialize;

use crate::error::ProvenanceError;
use crate::walk::Exclusions;

/// Names never uploaded: VCS metadata, virtualenvs, data and build outputs, caches.
pub const DEFAULT_EXCLUDES: [&str; 10] = [
    ".git",
    ".venv",
    "data",
    "data_evaluated",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "build",
    "dist",
    "node_modules",
];

/// The compiled exclude rules of one source tree.
#[derive(Debug, Clone)]
pub struct ExcludeRules {
    names: Vec<String>,
    globs: Vec<String>,
    glob_set: GlobSet,
}

impl ExcludeRules {
    /// The default names plus `globs` (matched against '/'-separated paths relative to the root).
    pub fn new(globs: &[String]) -> Result<Self, ProvenanceError> {
        let mut builder = GlobSetBuilder::new();
        for glob in globs {
            let parsed = Glob::new(glob).map_err(|e| ProvenanceError::BadGlob {
                glob: glob.clone(),
                message: e.to_string(),
            })?;
            builder.add(parsed);
        }
        let glob_set = builder.build().map_err(|e| ProvenanceError::BadGlob {
            glob: globs.join(", "),
            message: e.to_string(),
        })?;
        Ok(Self {
            names: DEFAULT_EXCLUDES.map(String::from).to_vec(),
            globs: globs.to_vec(),
            glob_set,
        })
    }

    /// The rule that excludes `rel_path` (an entry's '/'-separated path), if any. A default name
    /// matches when it equals the entry's last component (parents were checked before descent).
    pub fn matching_rule(&self, rel_path: &str) -> Option<String> {
        let last = rel_path.rsplit('/').next().unwrap_or(rel_path);
        if let Some(name) = self.names.iter().find(|n| n.as_str() == last) {
            return Some(name.clone());
        }
        let matches = self.glob_set.matches(rel_path);
        matches.first().map(|&i| self.globs[i].clone())
    }

    /// Every rule, defaults first, as written.
    pub fn rules(&self) -> Vec<String> {
        self.names.iter().chain(&self.globs).cloned().collect()
    }
}

impl Exclusions for ExcludeRules {
    fn excluding_rule(&self, rel_path: &str, _is_dir: bool) -> Option<String> {
        self.matching_rule(rel_path)
    }

    fn rules(&self) -> Vec<String> {
        ExcludeRules::rules(self)
    }
}

/// What the exclude rules removed: the rules and how many entries each excluded (an excluded
/// directory counts once; its contents are never read).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ExcludedSummary {
    /// Every rule, defaults first.
    pub rules: Vec<String>,
    /// Entries excluded per rule (rules that matched nothing are omitted).
    pub counts: BTreeMap<String, u64>,
    /// Total entries excluded.
    pub excluded_entry_count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_components_and_globs_match_paths() {
        let rules = ExcludeRules::new(&["*.log".into(), "secrets/**".into()]).unwrap();
        assert_eq!(
            rules.matching_rule("node_modules").as_deref(),
            Some("node_modules")
        );
        assert_eq!(
            rules.matching_rule("pkg/__pycache__").as_deref(),
            Some("__pycache__")
        );
        assert_eq!(rules.matching_rule("pkg/data").as_deref(), Some("data"));
        assert_eq!(rules.matching_rule("pkg/database.py"), None);
        assert_eq!(rules.matching_rule("run.log").as_deref(), Some("*.log"));
        assert_eq!(
            rules.matching_rule("secrets/a.txt").as_deref(),
            Some("secrets/**")
        );
        assert_eq!(rules.matching_rule("src/main.py"), None);
    }

    #[test]
    fn bad_glob_is_named() {
        let err = ExcludeRules::new(&["a[".into()]).unwrap_err().to_string();
        assert!(err.contains("`a[`"), "{err}");
    }
}
