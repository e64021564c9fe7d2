//! Runner-only record fields about containment: the limits a trial ran under (in its
//! config), and what the runner saw and did about a hostile agent (in its result). Harbor's
//! readers ignore them; each is left out of the JSON when it says nothing.

use serde::{Deserialize, Serialize};

/// How a trial's `storage_mb` was enforced.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StorageEnforcement {
    /// The storage driver enforces a quota on the container's writable layer.
    Quota,
    /// The runner checks the writable layer's size while the agent and verifier run and stops
    /// the trial with `StorageLimitExceededError` past the limit.
    Watched,
    /// The task sets no storage limit.
    None,
}

/// The limits one trial ran under (`config.json` → `limits`, runner-only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrialLimits {
    /// Most processes and threads the environment may hold at once (cgroup pids limit).
    pub pids_limit: u32,
    /// Memory limit in MB (the task's, or the runner's default when it sets none).
    pub memory_mb: u64,
    /// Memory plus swap in MB; equal to `memory_mb`, so no swap beyond the memory limit.
    pub memory_swap_mb: u64,
    /// CPU limit in cores, as the task sets it.
    pub cpus: Option<f64>,
    /// The task's storage limit in MB.
    pub storage_mb: Option<u64>,
    /// How `storage_mb` is enforced.
    pub storage_enforcement: StorageEnforcement,
    /// Most bytes of files the trial may bring back to the host (agent logs and artifacts
    /// together; the verifier's outputs have a budget of their own, at most 256 MiB); past it
    /// files are cut with a marker line.
    pub download_cap_bytes: u64,
    /// Most entries (files, directories, links, anything a tar holds) the trial may bring back
    /// under the same budget: empty files cost no bytes, so without it an agent could make
    /// the host create millions of them. Past it the rest of the archive is not read.
    #[serde(default = "default_download_cap_entries")]
    pub download_cap_entries: u64,
    /// Most bytes `trial.log` may hold; past it command output is dropped after a marker line.
    pub trial_log_cap_bytes: u64,
}

/// The entry cap of records written before it existed (the runner's default).
pub const DEFAULT_DOWNLOAD_CAP_ENTRIES: u64 = 100_000;

fn default_download_cap_entries() -> u64 {
    DEFAULT_DOWNLOAD_CAP_ENTRIES
}

/// A process the agent left running when verification started (`result.json` →
/// `agent_leftover_processes`, runner-only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeftoverProcess {
    /// Its pid in the environment (0 for the "and N more" line).
    pub pid: u32,
    /// Its user, by name when the environment's `/etc/passwd` knows it.
    pub user: String,
    /// Its command line, cut at a few hundred bytes.
    pub command: String,
}

impl LeftoverProcess {
    /// Parses the `pid\tuser\tcommand` lines both listings write; malformed lines are skipped.
    pub fn parse_listing(text: &str) -> Vec<LeftoverProcess> {
        text.lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, '\t');
                Some(LeftoverProcess {
                    pid: fields.next()?.trim().parse().ok()?,
                    user: fields.next()?.to_owned(),
                    command: fields.next()?.to_owned(),
                })
            })
            .collect()
    }
}

/// Whether the verifier ran isolated from what the agent left (`result.json` →
/// `verifier_isolation`, runner-only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VerifierIsolation {
    /// True when `/tests` and `/logs/verifier` were private to the tests.
    pub isolated: bool,
    /// The mechanism, or why it was unavailable.
    pub detail: String,
    /// Whose programs and startup hooks ran the tests: `"image"` (the task image's own, the
    /// default) or `"agent"` (the job opted into what the agent left, `--agent-toolchain`).
    /// Absent where no jail ran (a separate verifier, a backend without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<String>,
}

/// A file the runner cut at a cap, or a directory whose download stopped at the entry cap
/// (`result.json` → `truncated_outputs`, runner-only).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TruncatedOutput {
    /// The file, relative to the trial directory (`agent/oracle.txt`, `trial.log`), or the
    /// directory (`artifacts`) whose download stopped at the entry cap.
    pub path: String,
    /// The cap that cut it, in bytes (the trial's byte cap when the entry cap stopped it).
    pub cap_bytes: u64,
    /// Set when the trial's entry cap (`download_cap_entries`) stopped the download of the
    /// directory `path`: what it held past that many entries was not brought back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_entries: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_parse_and_skip_malformed_lines() {
        let text = "12\troot\tbash -c while :; do x; done\n\
                    bad line\n\
                    40\tnobody\tsleep\t1000\n";
        assert_eq!(
            LeftoverProcess::parse_listing(text),
            vec![
                LeftoverProcess {
                    pid: 12,
                    user: "root".into(),
                    command: "bash -c while :; do x; done".into()
                },
                LeftoverProcess {
                    pid: 40,
                    user: "nobody".into(),
                    command: "sleep\t1000".into()
                }
            ]
        );
    }

    #[test]
    fn storage_enforcement_serializes_in_snake_case() {
        assert_eq!(
            serde_json::to_string(&StorageEnforcement::Watched).unwrap(),
            "\"watched\""
        );
    }
}
