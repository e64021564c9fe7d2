//! What the scrubber removed, per output path and location, before it becomes the report.

use std::collections::BTreeMap;

use serde::Serialize;

use super::matcher::Tally;

/// Where in a file an occurrence was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Location {
    /// The bytes of the file or archive member.
    Content,
    /// The file, directory or member name.
    Name,
    /// A symlink's target.
    LinkTarget,
}

/// Counts keyed by (scrubbed output path, location). Paths inside archives read `a.tar.gz!dir/f`.
#[derive(Debug, Default)]
pub struct Findings {
    /// The counts.
    pub entries: BTreeMap<(String, Location), Tally>,
}

impl Findings {
    /// Adds a tally for a path and location (no-op when empty).
    pub fn add(&mut self, path: &str, location: Location, tally: Tally) {
        if tally.is_empty() {
            return;
        }
        let slot = self
            .entries
            .entry((path.to_string(), location))
            .or_default();
        for (hit, n) in tally {
            *slot.entry(hit).or_default() += n;
        }
    }

    /// Moves everything from `other` into `self`.
    pub fn merge(&mut self, other: Findings) {
        for ((path, location), tally) in other.entries {
            self.add(&path, location, tally);
        }
    }
}
