//! Per-phase network policy (Harbor's `trial/network_policy.py`): each phase runs
//! under the `[agent]` or `[verifier]` `network_mode` when it declares one (a step's
//! `[steps.agent]`/`[steps.verifier]` over the task's), else under its environment's
//! baseline, which is restored after the phase. Harbor's Docker backend (0.26) fixes the policy
//! when the container starts and refuses a later change; runner switches the running
//! container's networks instead
//! ([`crate::Environment::set_network`]).

use tasks::ExceptionType;
use tasks::config::{
    EnvironmentSection, NetworkMode, StepConfig, TaskConfig, VerifierEnvironmentMode,
};

use super::Trial;
use super::log::TrialLog;
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
        Self::resolve(config, None)
    }

    /// The plan of one step of a multi-step task (Harbor's `_network_plan(step_cfg)`): the
    /// step's `[steps.agent]`/`[steps.verifier]` `network_mode` over the task's, and the
    /// step's verifier mode and environment (see [`step_verifier_environment`]).
    pub fn of_step(config: &TaskConfig, step: &StepConfig) -> NetworkPlan {
        Self::resolve(config, Some(step))
    }

    /// The plan of the task (`step` `None`: [`Self::of`]) or of one of its steps
    /// ([`Self::of_step`]).
    pub fn resolve(config: &TaskConfig, step: Option<&StepConfig>) -> NetworkPlan {
        let agent_baseline = config.environment.effective_network();
        let verifier_baseline =
            verifier_environment(config, step).map(EnvironmentSection::effective_network);
        let agent_mode = step.and_then(|s| s.agent.network_mode);
        let verifier_mode = step.and_then(|s| s.verifier.network_mode);
        NetworkPlan {
            agent_baseline,
            agent_phase: agent_mode
                .or(config.agent.network_mode)
                .unwrap_or(agent_baseline),
            verifier_baseline,
            verifier_phase: verifier_mode
                .or(config.verifier.network_mode)
                .unwrap_or(verifier_baseline.unwrap_or(agent_baseline)),
        }
    }

    /// True when the agent's environment changes network during the trial.
    pub fn agent_environment_switches(&self) -> bool {
        self.agent_phase != self.agent_baseline
            || (self.verifier_baseline.is_none() && self.verifier_phase != self.agent_baseline)
    }

    /// True when the agent's environment of a task changes network in any of its phases (a
    /// multi-step task's: in any step), so it must start switchable.
    pub fn task_switches(config: &TaskConfig) -> bool {
        if config.steps.is_empty() {
            return Self::of(config).agent_environment_switches();
        }
        config
            .steps
            .iter()
            .any(|step| Self::of_step(config, step).agent_environment_switches())
    }
}

/// The verifier mode of a single-step task (Harbor's `resolve_task_verifier_mode`).
pub fn resolved_verifier_mode(config: &TaskConfig) -> VerifierEnvironmentMode {
    config
        .verifier
        .declared_mode()
        .unwrap_or(VerifierEnvironmentMode::Shared)
}

/// The verifier mode of one step (Harbor's `resolve_step_verifier_mode`): the step's
/// explicit mode, else separate when it has `[steps.verifier.environment]`, else the task's.
pub fn resolved_step_verifier_mode(
    config: &TaskConfig,
    step: &StepConfig,
) -> VerifierEnvironmentMode {
    step.verifier
        .declared_mode()
        .unwrap_or_else(|| resolved_verifier_mode(config))
}

/// The environment the verifier of the task (`step` `None`) or of `step` runs in, `None` in
/// the shared mode (Harbor's `resolve_effective_verifier_env_config`): the step's
/// `[steps.verifier.environment]`, else `[verifier.environment]`, else `[environment]`.
pub fn verifier_environment<'a>(
    config: &'a TaskConfig,
    step: Option<&'a StepConfig>,
) -> Option<&'a EnvironmentSection> {
    let mode = match step {
        Some(step) => resolved_step_verifier_mode(config, step),
        None => resolved_verifier_mode(config),
    };
    if mode != VerifierEnvironmentMode::Separate {
        return None;
    }
    step.and_then(|s| s.verifier.environment.as_deref())
        .or(config.verifier.environment.as_deref())
        .or(Some(&config.environment))
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
        let Some(environment) = self.environment.as_ref() else {
            return Ok(());
        };
        switch_network(environment, &self.log, phase, from, to).await
    }
}

/// Switches `environment` from `from` to `to` for `phase` (nothing when they are equal),
/// logged in `log`: a trial's agent environment between its phases, and a `runner serve`
/// episode's between the policy's, a step's setup and the verifier's.
pub async fn switch_network<E: Environment>(
    environment: &E,
    log: &TrialLog,
    phase: &str,
    from: NetworkMode,
    to: NetworkMode,
) -> Result<(), TrialFailure> {
    if from == to {
        return Ok(());
    }
    switch(environment, phase, to).await?;
    log.line(&format!(
        "network {} -> {} for the {phase}",
        from.as_str(),
        to.as_str()
    ));
    Ok(())
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
    fn a_steps_modes_go_over_the_tasks_and_its_verifier_environment_is_its_own() {
        let config = parse_task_config(
            std::path::Path::new("task.toml"),
            "[agent]\nnetwork_mode = \"no-network\"\n[verifier]\nenvironment_mode = \"separate\"\n\
             [[steps]]\nname = \"a\"\n\
             [[steps]]\nname = \"b\"\n[steps.agent]\nnetwork_mode = \"public\"\n\
             [steps.verifier]\nenvironment_mode = \"shared\"\nnetwork_mode = \"no-network\"\n\
             [[steps]]\nname = \"c\"\n[steps.verifier.environment]\nnetwork_mode = \"no-network\"\n",
        )
        .unwrap()
        .config;
        let [a, b, c] = [0, 1, 2].map(|i| NetworkPlan::of_step(&config, &config.steps[i]));
        // a: the task's offline agent; a separate verifier on a copy of [environment].
        assert_eq!(
            (a.agent_phase, a.verifier_baseline),
            (NoNetwork, Some(Public))
        );
        assert_eq!(a.verifier_phase, Public);
        assert!(a.agent_environment_switches());
        // b: its own online agent; a shared verifier, offline.
        assert_eq!((b.agent_phase, b.verifier_baseline), (Public, None));
        assert_eq!(b.verifier_phase, NoNetwork);
        assert!(b.agent_environment_switches());
        // c: its own verifier environment's baseline.
        assert_eq!(
            (c.verifier_baseline, c.verifier_phase),
            (Some(NoNetwork), NoNetwork)
        );
        assert!(NetworkPlan::task_switches(&config));
        let still = parse_task_config(
            std::path::Path::new("task.toml"),
            "[[steps]]\nname = \"a\"\n[steps.verifier]\nenvironment_mode = \"separate\"\nnetwork_mode = \"no-network\"\n",
        )
        .unwrap()
        .config;
        assert!(
            !NetworkPlan::task_switches(&still),
            "only the separate verifier's container switches"
        );
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
