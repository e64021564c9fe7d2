//! The tree digest: Go's `dirhash` `Hash1` over the regular files of the upload set, in hex, so
//! anyone can reproduce it with `find . -type f | cut -c3- | LC_ALL=C sort | xargs -r sha256sum | sha256sum`.
//! It covers file names and contents only; modes and symlinks are covered by the tar digest.

use sha2::{Digest, Sha256};

use crate::error::ProvenanceError;
use crate::walk::{EntryKind, SourceTree};

/// Lowercase hex `dirHash1` of the regular files of `tree`.
pub fn tree_digest(tree: &SourceTree) -> Result<String, ProvenanceError> {
    let mut summary = Sha256::new();
    for entry in tree
        .entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::File { .. }))
    {
        let bytes =
            std::fs::read(&entry.abs_path).map_err(|e| ProvenanceError::io(&entry.abs_path, e))?;
        summary.update(format!(
            "{}  {}\n",
            hex::encode(Sha256::digest(&bytes)),
            entry.rel_path
        ));
    }
    Ok(hex::encode(summary.finalize()))
}
