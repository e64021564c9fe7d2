//! Phase deadlines with Harbor's multiplier rules (reference §5.3):
//! `timeout = base × (phase multiplier if set, else the global multiplier)`.

use std::time::Duration;

use tasks::TaskConfig;

/// Harbor's fixed agent-setup timeout.
pub const AGENT_SETUP_TIMEOUT_SEC: f64 = 360.0;

/// The global and per-phase multipliers of a job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Multipliers {
    /// Applies to every phase without its own multiplier.
    pub global: f64,
    /// Agent phase.
    pub agent: Option<f64>,
    /// Verifier phase.
    pub verifier: Option<f64>,
    /// Agent setup phase.
    pub agent_setup: Option<f64>,
    /// Environment build/start phase.
    pub environment_build: Option<f64>,
}

impl Default for Multipliers {
    fn default() -> Self {
        Self {
            global: 1.0,
            agent: None,
            verifier: None,
            agent_setup: None,
            environment_build: None,
        }
    }
}

/// The resolved deadlines of one trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseTimeouts {
    /// Image build and container start.
    pub environment_build: Duration,
    /// Agent install.
    pub agent_setup: Duration,
    /// Agent run; `None` when the task sets no agent timeout.
    pub agent: Option<Duration>,
    /// Verification.
    pub verifier: Duration,
}

impl PhaseTimeouts {
    /// Resolves the deadlines of a task under `multipliers`.
    pub fn resolve(task: &TaskConfig, multipliers: &Multipliers) -> PhaseTimeouts {
        let scale = |base: f64, phase: Option<f64>| {
            Duration::from_secs_f64(base * phase.unwrap_or(multipliers.global))
        };
        PhaseTimeouts {
            environment_build: scale(
                task.environment.build_timeout_sec,
                multipliers.environment_build,
            ),
            agent_setup: scale(AGENT_SETUP_TIMEOUT_SEC, multipliers.agent_setup),
            agent: task
                .agent
                .timeout_sec
                .map(|base| scale(base, multipliers.agent)),
            verifier: scale(task.verifier.timeout_sec, multipliers.verifier),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> TaskConfig {
        let mut config = TaskConfig::default();
        config.agent.timeout_sec = Some(100.0);
        config.verifier.timeout_sec = 50.0;
        config.environment.build_timeout_sec = 200.0;
        config
    }

    #[test]
    fn defaults_use_task_values_and_360s_setup() {
        let t = PhaseTimeouts::resolve(&task(), &Multipliers::default());
        assert_eq!(t.agent, Some(Duration::from_secs(100)));
        assert_eq!(t.verifier, Duration::from_secs(50));
        assert_eq!(t.environment_build, Duration::from_secs(200));
        assert_eq!(t.agent_setup, Duration::from_secs(360));
    }

    #[test]
    fn phase_multiplier_replaces_global_for_its_phase_only() {
        let m = Multipliers {
            global: 2.0,
            agent: Some(0.5),
            ..Multipliers::default()
        };
        let t = PhaseTimeouts::resolve(&task(), &m);
        assert_eq!(t.agent, Some(Duration::from_secs(50)));
        assert_eq!(t.verifier, Duration::from_secs(100));
        assert_eq!(t.agent_setup, Duration::from_secs(720));
        assert_eq!(t.environment_build, Duration::from_secs(400));
    }

    #[test]
    fn no_agent_timeout_stays_unbounded() {
        let mut config = task();
        config.agent.timeout_sec = None;
        assert_eq!(
            PhaseTimeouts::resolve(
                &config,
                &Multipliers {
                    global: 3.0,
                    ..Default::default()
                }
            )
            .agent,
            None
        );
    }
}
