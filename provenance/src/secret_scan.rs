//! The known-secret check: refuses to upload a source tree holding the value of a credential
//! the host (or the agent config) knows. Errors name the file and the variable, never the value.

use aho_corasick::AhoCorasick;

use crate::error::ProvenanceError;
use crate::walk::{EntryKind, SourceTree};

/// Searches every file and symlink target of `tree` for the values of `known` (`(variable
/// name, value)` pairs). Values shorter than [`secrets::MIN_SECRET_LEN`] are skipped: they are
/// too likely to occur by chance. Returns how many values were searched for (the record shows
/// the check ran); the first hit is an error naming the file and the variable, never the value.
pub fn check_tree(tree: &SourceTree, known: &[(String, String)]) -> Result<usize, ProvenanceError> {
    let known: Vec<&(String, String)> = known
        .iter()
        .filter(|(_, v)| secrets::is_long_enough(v))
        .collect();
    if known.is_empty() {
        return Ok(0);
    }
    let matcher = AhoCorasick::new(known.iter().map(|(_, v)| v.as_bytes()))
        .map_err(|e| ProvenanceError::Archive(std::io::Error::other(e)))?;
    for entry in &tree.entries {
        let hit = match &entry.kind {
            EntryKind::Dir => None,
            EntryKind::Symlink { target } => matcher.find(target.as_bytes()),
            EntryKind::File { .. } => {
                let bytes = std::fs::read(&entry.abs_path)
                    .map_err(|e| ProvenanceError::io(&entry.abs_path, e))?;
                matcher.find(&bytes)
            }
        };
        if let Some(hit) = hit {
            return Err(ProvenanceError::SecretInSource {
                path: entry.rel_path.clone(),
                variable: known[hit.pattern().as_usize()].0.clone(),
            });
        }
    }
    Ok(known.len())
}
