//! Deterministic agent source tarballs and source-provenance records: digests and git state as counts, never diffs or secrets.
