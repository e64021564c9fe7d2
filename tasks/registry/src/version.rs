//! Harbor's rule for a dataset named without a version (`resolve_version` in
//! `harbor/registry/client/base.py`): `head` if the registry has it, else the highest version
//! that parses as a PEP 440 version, else the lexically last.

use std::cmp::Ordering;

/// The version Harbor picks among `versions` (`None`: there are none).
pub fn resolve_version<'a>(versions: &[&'a str]) -> Option<&'a str> {
    if versions.contains(&"head") {
        return Some("head");
    }
    let best = versions
        .iter()
        .filter_map(|v| Pep440::parse(v).map(|p| (p, *v)))
        .max_by(|a, b| a.0.cmp(&b.0));
    if let Some((_, v)) = best {
        return Some(v);
    }
    versions.iter().max().copied()
}

/// The part of PEP 440 registries use: an optional `v`, release numbers (`2`, `2.0.1`), an
/// optional pre-release (`a1`, `b2`, `rc1`), post-release (`.post1`) or dev release (`.dev3`).
/// Trailing zeros do not count (`2.0` == `2`), as in `packaging.version`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pep440 {
    release: Vec<u64>,
    /// dev < pre (a < b < rc) < final < post, as a sortable tuple.
    phase: (u8, u64),
}

impl Pep440 {
    fn parse(text: &str) -> Option<Pep440> {
        let lower = text.trim().to_ascii_lowercase();
        let body = lower.strip_prefix('v').unwrap_or(&lower);
        let end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (release, rest) = body.split_at(end);
        let release = release.strip_suffix('.').unwrap_or(release);
        let mut numbers = release
            .split('.')
            .map(|n| n.parse::<u64>().ok())
            .collect::<Option<Vec<u64>>>()?;
        while numbers.len() > 1 && numbers.last() == Some(&0) {
            numbers.pop();
        }
        let rest = rest.trim_start_matches(['.', '-', '_']);
        let number = |s: &str| -> Option<u64> {
            if s.is_empty() {
                Some(0)
            } else {
                s.parse().ok()
            }
        };
        let phase = if rest.is_empty() {
            (3, 0)
        } else if let Some(n) = rest.strip_prefix("dev") {
            (0, number(n)?)
        } else if let Some(n) = rest.strip_prefix("rc") {
            (2, 2_000_000 + number(n)?)
        } else if let Some(n) = rest.strip_prefix('b') {
            (2, 1_000_000 + number(n)?)
        } else if let Some(n) = rest.strip_prefix('a') {
            (2, number(n)?)
        } else if let Some(n) = rest.strip_prefix("post") {
            (4, number(n)?)
        } else {
            return None;
        };
        Some(Pep440 {
            release: numbers,
            phase,
        })
    }
}

impl PartialOrd for Pep440 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pep440 {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.release.len().max(other.release.len());
        let at = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
        (0..len)
            .map(|i| at(&self.release, i).cmp(&at(&other.release, i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
            .then(self.phase.cmp(&other.phase))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_wins_whatever_else_there_is() {
        assert_eq!(resolve_version(&["2.0", "head", "10.0"]), Some("head"));
    }

    #[test]
    fn the_highest_pep440_version_wins_numerically_not_lexically() {
        assert_eq!(resolve_version(&["2.0", "10.0", "9.1"]), Some("10.0"));
        assert_eq!(resolve_version(&["1.0", "1.0rc1", "0.9"]), Some("1.0"));
        assert_eq!(resolve_version(&["1.0.post1", "1.0"]), Some("1.0.post1"));
        assert_eq!(resolve_version(&["1.0.dev1", "1.0a1"]), Some("1.0a1"));
        assert_eq!(resolve_version(&["v2", "1.5", "nightly"]), Some("v2"));
    }

    #[test]
    fn without_parseable_versions_the_lexically_last_wins() {
        assert_eq!(resolve_version(&["alpha", "beta", "gamma"]), Some("gamma"));
        assert_eq!(resolve_version(&[]), None);
    }
}
