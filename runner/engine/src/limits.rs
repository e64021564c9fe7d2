//! The limits every trial runs under, whatever its task asks: a pids limit, a memory limit
//! without extra swap, caps on what comes back to the host, and how `storage_mb` is enforced.
//! Pure rules; the backend applies them and the trial records them in `config.json`.

use std::time::Duration;

use tasks::TaskConfig;
use tasks::records::{StorageEnforcement, TrialLimits};

/// The fewest processes a trial may hold: enough for a parallel build or a browser.
pub const MIN_PIDS_LIMIT: u32 = 1024;
/// Processes per requested CPU above the minimum.
pub const PIDS_PER_CPU: u32 = 256;
/// Memory of a task that sets none, in MB (Harbor's newer default is 2048; 4096 leaves room for
/// the tasks written against Harbor 0.13, which sets no limit at all).
pub const DEFAULT_MEMORY_MB: u64 = 4096;
/// Storage of a task that sets none, in MB: Harbor's newer default (`storage_mb = 10240`).
/// Without a limit an agent could fill the host's disk, and every trial's plumbing would then
/// fail as infrastructure errors: a limit makes a full disk the agent's failure.
pub const DEFAULT_STORAGE_MB: u64 = 10240;
/// Default cap on the files a trial brings back (agent logs and artifacts).
pub const DEFAULT_DOWNLOAD_CAP_BYTES: u64 = 1024 << 20;
/// Default cap on the entries a trial brings back (files, directories, links: each costs the
/// host an inode and a tar header even when empty). Generous for logs and artifacts trees;
/// a flood of millions of empty files stops here.
pub const DEFAULT_DOWNLOAD_CAP_ENTRIES: u64 = tasks::records::DEFAULT_DOWNLOAD_CAP_ENTRIES;
/// Default cap on `trial.log`.
pub const DEFAULT_TRIAL_LOG_CAP_BYTES: u64 = 100 << 20;
/// How often a watched `storage_mb` is checked.
pub const DEFAULT_STORAGE_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// What the user chose for every trial of a job (flags of `runner run`).
#[derive(Debug, Clone, PartialEq)]
pub struct LimitSettings {
    /// A pids limit for every trial instead of the one derived from the task's CPUs.
    pub pids_limit: Option<u32>,
    /// Cap on downloaded files per trial.
    pub download_cap_bytes: u64,
    /// Cap on downloaded entries per trial (files, directories, links).
    pub download_cap_entries: u64,
    /// Cap on `trial.log`.
    pub trial_log_cap_bytes: u64,
    /// How often a watched storage limit is checked.
    pub storage_check_interval: Duration,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            pids_limit: None,
            download_cap_bytes: DEFAULT_DOWNLOAD_CAP_BYTES,
            download_cap_entries: DEFAULT_DOWNLOAD_CAP_ENTRIES,
            trial_log_cap_bytes: DEFAULT_TRIAL_LOG_CAP_BYTES,
            storage_check_interval: DEFAULT_STORAGE_CHECK_INTERVAL,
        }
    }
}

impl LimitSettings {
    /// The limits of one trial of `task`. Storage is the task's `storage_mb`, else
    /// [`DEFAULT_STORAGE_MB`]; its enforcement starts as `Watched`, and the backend reports
    /// `Quota` once it knows its driver enforces it.
    pub fn resolve(&self, task: &TaskConfig) -> TrialLimits {
        let env = &task.environment;
        let memory_mb = env.effective_memory_mb().unwrap_or(DEFAULT_MEMORY_MB);
        let storage_mb = Some(env.effective_storage_mb().unwrap_or(DEFAULT_STORAGE_MB));
        TrialLimits {
            pids_limit: self.pids_limit.unwrap_or_else(|| pids_for(env.cpus)),
            memory_mb,
            memory_swap_mb: memory_mb,
            cpus: env.cpus,
            storage_mb,
            storage_enforcement: if storage_mb.is_some() {
                StorageEnforcement::Watched
            } else {
                StorageEnforcement::None
            },
            download_cap_bytes: self.download_cap_bytes,
            download_cap_entries: self.download_cap_entries,
            trial_log_cap_bytes: self.trial_log_cap_bytes,
        }
    }
}

/// `max(1024, 256 × ceil(cpus))`: a fork bomb stops there, a `make -j` does not.
fn pids_for(cpus: Option<f64>) -> u32 {
    let cpus = cpus.filter(|c| c.is_finite() && *c > 0.0).unwrap_or(1.0);
    let per_cpu = (cpus.ceil().min(1024.0) as u32).saturating_mul(PIDS_PER_CPU);
    per_cpu.max(MIN_PIDS_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_scale_with_cpus_above_a_floor() {
        assert_eq!(pids_for(None), 1024);
        assert_eq!(pids_for(Some(0.5)), 1024);
        assert_eq!(pids_for(Some(4.0)), 1024);
        assert_eq!(pids_for(Some(8.0)), 2048);
        assert_eq!(pids_for(Some(f64::INFINITY)), 1024);
        assert_eq!(pids_for(Some(1e9)), 1024 * 256);
    }

    #[test]
    fn memory_has_no_extra_swap_and_memory_and_storage_have_defaults() {
        let mut task = TaskConfig::default();
        let limits = LimitSettings::default().resolve(&task);
        assert_eq!((limits.memory_mb, limits.memory_swap_mb), (4096, 4096));
        assert_eq!(
            limits.storage_mb,
            Some(DEFAULT_STORAGE_MB),
            "Harbor's default"
        );
        assert_eq!(limits.storage_enforcement, StorageEnforcement::Watched);
        task.environment.memory_mb = Some(1024);
        task.environment.storage_mb = Some(2048);
        let limits = LimitSettings::default().resolve(&task);
        assert_eq!((limits.memory_mb, limits.memory_swap_mb), (1024, 1024));
        assert_eq!(limits.storage_mb, Some(2048));
        assert_eq!(limits.storage_enforcement, StorageEnforcement::Watched);
    }

    #[test]
    fn a_pids_override_wins() {
        let settings = LimitSettings {
            pids_limit: Some(64),
            ..LimitSettings::default()
        };
        assert_eq!(settings.resolve(&TaskConfig::default()).pids_limit, 64);
    }
}
