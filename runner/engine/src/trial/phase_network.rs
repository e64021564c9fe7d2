//! Per-phase network policy (Harbor's `trial/network_policy.py`, single-step): each phase runs
//! under the `[agent]` or `[verifier]` `network_mode` when it declares one, else under its
//! environment's baseline. Harbor's Docker backend refuses a phase that differs from the
//! baseline; runner switches the running container's networks instead
//! ([`crate::Environment::set_network`]).

use tasks::ExceptionType;
use tasks::config::{NetworkMode, TaskConfig, VerifierEnvironmentMode};

use super::Trial;
use crate::backend::{Backend, Environment, NetworkAccess};
use crate::failure::TrialFailure;

/// The network of each phase of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkPlan {
    /// The agent environment's baseline (`[environment]`): environment start and agent setup.
    pub agent_baseline: NetworkMode,
    /// The agent run.
    pub agent_phase: NetworkMode,
    /// The separate verifier environment's baseline, `None` in the shared mode.
    pub verifier_baseline: Option<NetworkMode>,
    /// The verification.
    pub verifier_phase: NetworkMode,
}

impl NetworkPlan {
    /// Harbor's `resolve_trial_network_plan` for a single-step task without run-time host
    /// merges: an explicit phase mode wins, else the baseline of the environment the phase
    /// runs in (the agent's, or the separate verifier's: `[verifier.environment]`, else a copy
    /// of `[environment]`).
    pub fn of(config: &TaskConfig) -> NetworkPlan {
        let agent_baseline = config.environment.effective_network();
        let verifier_baseline = (resolved_verifier_mode(config)
            == VerifierEnvironmentMode::Separate)
            .then(|| match &config.verifier.environment {
                Some(env) => env.effective_network(),
                None => agent_baseline,
            });
        NetworkPlan {
            agent_baseline,
            agent_phase: config.agent.network_mode.unwrap_or(agent_baseline),
            verifier_baseline,
            verifier_phase: config
                .verifier
                .network_mode
                .unwrap_or(verifier_baseline.unwrap_or(agent_baseline)),
        }
    }

    /// True when the agent's environment changes network during the trial.
    pub fn agent_environment_switches(&self) -> bool {
        self.agent_phase != self.agent_baseline
            || (self.verifier_baseline.is_none() && self.verifier_phase != self.agent_baseline)
    }
}

/// The verifier mode of a single-step task (Harbor's `resolve_task_verifier_mode`).
pub fn resolved_verifier_mode(config: &TaskConfig) -> VerifierEnvironmentMode {
    config
        .verifier
        .declared_mode()
        .unwrap_or(VerifierEnvironmentMode::Shared)
}

/// The backend's access for a mode (`allowlist` is refused at load, so it never gets here;
/// were it to, no network is the safe reading).
pub fn access(mode: NetworkMode) -> NetworkAccess {
    match mode {
        NetworkMode::Public => NetworkAccess::Public,
        NetworkMode::NoNetwork | NetworkMode::Allowlist => NetworkAccess::None,
    }
}

impl<B: Backend> Trial<B> {
    /// The trial's network plan.
    pub(super) fn network_plan(&self) -> NetworkPlan {
        NetworkPlan::of(&self.plan.task.config)
    }

    /// Switches the agent's environment from `from` to `to` (nothing when they are equal). A
    /// switch that fails ends the trial: running a phase under the wrong policy is never
    /// acceptable.
    pub(super) async fn switch_network(
        &self,
        phase: &str,
        from: NetworkMode,
        to: NetworkMode,
    ) -> Result<(), TrialFailure> {
        if from == to {
            return Ok(());
        }
        let Some(environment) = self.environment.as_ref() else {
            return Ok(());
        };
        switch(environment, phase, to).await?;
        self.log.line(&format!(
            "network {} -> {} for the {phase}",
            from.as_str(),
            to.as_str()
        ));
        Ok(())
    }
}

/// Sets `environment`'s network to `to` for `phase`.
pub(super) async fn switch<E: Environment>(
    environment: &E,
    phase: &str,
    to: NetworkMode,
) -> Result<(), TrialFailure> {
    // The backend checks the switch took (Docker: the engine's view of the container).
    environment.set_network(access(to)).await.map_err(|e| {
        TrialFailure::new(
            ExceptionType::EnvironmentError,
            format!(
                "switching the network to {:?} for the {phase} failed: {e}",
                to.as_str()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tasks::config::parse_task_config;

    fn plan(toml: &str) -> NetworkPlan {
        let config = parse_task_config(std::path::Path::new("task.toml"), toml)
            .unwrap()
            .config;
        NetworkPlan::of(&config)
    }

    use NetworkMode::{NoNetwork, Public};

    #[test]
    fn phases_inherit_the_baseline_unless_they_declare_a_mode() {
        let p = plan("");
        assert_eq!((p.agent_phase, p.verifier_phase), (Public, Public));
        assert!(!p.agent_environment_switches());
        let p = plan("[environment]\nnetwork_mode = \"no-network\"\n");
        assert_eq!((p.agent_phase, p.verifier_phase), (NoNetwork, NoNetwork));
        assert!(!p.agent_environment_switches());
    }

    #[test]
    fn an_offline_agent_with_an_online_verifier_switches_the_shared_environment() {
        let p = plan("[agent]\nnetwork_mode = \"no-network\"\n");
        assert_eq!(
            (p.agent_baseline, p.agent_phase, p.verifier_phase),
            (Public, NoNetwork, Public)
        );
        assert!(p.agent_environment_switches());
        let p =
            plan("[environment]\nallow_internet = false\n[verifier]\nnetwork_mode = \"public\"\n");
        assert_eq!((p.agent_phase, p.verifier_phase), (NoNetwork, Public));
        assert!(p.agent_environment_switches());
    }

    #[test]
    fn a_separate_verifier_has_its_own_baseline() {
        let p = plan(
            "[environment]\nnetwork_mode = \"no-network\"\n[verifier.environment]\nnetwork_mode = \"public\"\n",
        );
        assert_eq!(p.verifier_baseline, Some(Public));
        assert_eq!(p.verifier_phase, Public);
        assert!(!p.agent_environment_switches());
        // Without [verifier.environment], the verifier's environment copies [environment].
        let p = plan(
            "[environment]\nnetwork_mode = \"no-network\"\n[verifier]\nenvironment_mode = \"separate\"\nnetwork_mode = \"public\"\n",
        );
        assert_eq!(p.verifier_baseline, Some(NoNetwork));
        assert_eq!(p.verifier_phase, Public);
        assert!(!p.agent_environment_switches());
    }
}
