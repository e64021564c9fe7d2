//! ATIF schema versions and what each one introduced (docs/harbor-format.md §7.1).

use std::fmt;

/// An ATIF schema version, `ATIF-v1.0` … `ATIF-v1.7`; ordered oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(u8);

impl Version {
    /// ATIF-v1.0: the base schema.
    pub const V1_0: Version = Version(0);
    /// ATIF-v1.1: root `extra`.
    pub const V1_1: Version = Version(1);
    /// ATIF-v1.2: observations on system steps.
    pub const V1_2: Version = Version(2);
    /// ATIF-v1.3: `metrics.completion_token_ids`.
    pub const V1_3: Version = Version(3);
    /// ATIF-v1.4: `metrics.prompt_token_ids`.
    pub const V1_4: Version = Version(4);
    /// ATIF-v1.5: `agent.tool_definitions`, `step.is_copied_context`.
    pub const V1_5: Version = Version(5);
    /// ATIF-v1.6: multimodal content parts.
    pub const V1_6: Version = Version(6);
    /// ATIF-v1.7: trajectory ids, embedded subagent trajectories, `llm_call_count`, more `extra`s;
    /// `session_id` became optional.
    pub const V1_7: Version = Version(7);
    /// The newest version this validator knows, used for new trajectories.
    pub const LATEST: Version = Version::V1_7;

    /// Parses `ATIF-v1.N` for N in 0..=7.
    pub fn parse(text: &str) -> Option<Version> {
        let minor = text.strip_prefix("ATIF-v1.")?;
        if minor.len() != 1 {
            return None;
        }
        let n: u8 = minor.parse().ok()?;
        (n <= 7).then_some(Version(n))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ATIF-v1.{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_versions_only() {
        assert_eq!(Version::parse("ATIF-v1.0"), Some(Version::V1_0));
        assert_eq!(Version::parse("ATIF-v1.7"), Some(Version::V1_7));
        assert_eq!(Version::parse("ATIF-v1.8"), None);
        assert_eq!(Version::parse("ATIF-v1.10"), None);
        assert_eq!(Version::parse("v1.6"), None);
        assert!(Version::V1_5 < Version::V1_6);
        assert_eq!(Version::V1_6.to_string(), "ATIF-v1.6");
    }
}
