//! Phase deadlines with Harbor's multiplier rules:
//! `timeout = base × (phase multiplier if set, else the global multiplier)`.

use std::fmt;
use std::time::Duration;

use tasks::{Multipliers, TaskConfig, TimedPhase};

/// Harbor's fixed agent-setup timeout.
pub const AGENT_SETUP_TIMEOUT_SEC: f64 = 360.0;

/// The resolved deadlines of one trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseTimeouts {
    /// Image build and environment start.
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
        PhaseTimeouts {
            environment_build: multipliers.scale(
                task.environment.build_timeout_sec,
                TimedPhase::EnvironmentBuild,
            ),
            agent_setup: multipliers.scale(AGENT_SETUP_TIMEOUT_SEC, TimedPhase::AgentSetup),
            agent: task
                .agent
                .timeout_sec
                .map(|base| multipliers.scale(base, TimedPhase::Agent)),
            verifier: multipliers.scale(task.verifier.timeout_sec, TimedPhase::Verifier),
        }
    }
}

/// The line `trial.log` shows: `environment 600s, agent setup 360s, agent 120s, verifier 60s`.
impl fmt::Display for PhaseTimeouts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = |d: Duration| d.as_secs_f64();
        write!(
            f,
            "environment {}s, agent setup {}s, agent ",
            secs(self.environment_build),
            secs(self.agent_setup)
        )?;
        match self.agent {
            Some(agent) => write!(f, "{}s", secs(agent))?,
            None => f.write_str("unbounded")?,
        }
        write!(f, ", verifier {}s", secs(self.verifier))
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
        assert_eq!(
            t.to_string(),
            "environment 200s, agent setup 360s, agent 100s, verifier 50s"
        );
    }

    #[test]
    fn phase_multiplier_replaces_global_for_its_phase_only() {
        let m = Multipliers {
            timeout_multiplier: 2.0,
            agent_timeout_multiplier: Some(0.5),
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
        let m = Multipliers {
            timeout_multiplier: 3.0,
            ..Default::default()
        };
        let t = PhaseTimeouts::resolve(&config, &m);
        assert_eq!(t.agent, None);
        assert!(t.to_string().contains("agent unbounded"));
    }
}
