//! Network allowlists (`network_mode = "allowlist"` with `allowed_hosts`) enforced on any
//! engine with no extra image: a task that names one gets a host-side egress proxy
//! ([`egress::EgressProxy`]) for the whole trial, with one socket per side, each in a
//! directory with the static relay. The agent's side is bind-mounted read-only into the trial
//! container; the tests' side only where the tests run (the verifier jail, whose helper starts
//! its relay, or a separate verifier's container), so no process of the agent ever holds or
//! finds it. An allowlist phase's container has no network (as `no-network`); the relay turns
//! `127.0.0.1:<port>` inside into its side's socket, and `HTTP_PROXY`/`HTTPS_PROXY` (both
//! cases) point there. Each phase sets its side's policy (its own hosts, `Open` for a public
//! phase, `Closed` for `no-network`) and closes the other side; an agent phase restarts the
//! agent's relay, so nothing the agent did to the last one carries over, and the verifier
//! phase stops it.

use std::collections::BTreeMap;

use egress::{Allowlist, AllowlistError, EgressProxy, Policy, Resolver, Side};
use tasks::config::{NetworkMode, StepConfig, TaskConfig};
use tasks::{ExceptionType, Sandbox};

use super::Trial;
use super::phase_network::{NetworkPlan, verifier_environment};
use super::relay::{self, RELAY_WAIT_MS};
use crate::backend::{Backend, BindMount, EnvironmentSpec};
use crate::failure::TrialFailure;

/// Where the proxy's directory (socket and relay) is mounted in the container: the agent's
/// side in the trial container, the tests' side in a separate verifier's.
pub const CONTAINER_EGRESS_DIR: &str = "/run/runner-egress";
/// Where the tests' side is mounted in the verifier jail (never in the trial container).
pub const JAIL_EGRESS_DIR: &str = "/run/runner-egress-tests";
/// Names the proxy resolves to fixed addresses (`name=ip[,name=ip…]`), as `curl --resolve`:
/// for air-gapped mirrors, and for the tests.
pub const RESOLVE_ENV: &str = "RUNNER_EGRESS_RESOLVE";
const RELAY_LOG: &str = "/tmp/runner-egress-relay.log";
const RELAY_PID: &str = "/tmp/runner-egress-relay.pid";

/// The phases a single-step trial's network policy changes between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EgressPhase {
    /// Environment start and agent setup, under `[environment]`.
    Setup,
    /// The agent's run, under `[agent]` (else `[environment]`).
    Agent,
    /// The tests, under `[verifier]` (else `[environment]`).
    Verifier,
}

impl EgressPhase {
    fn name(self) -> &'static str {
        match self {
            EgressPhase::Setup => "setup",
            EgressPhase::Agent => "agent",
            EgressPhase::Verifier => "verifier",
        }
    }

    /// The trial subdirectory whose `network.jsonl` logs the phase.
    fn log_dir(self) -> &'static str {
        match self {
            EgressPhase::Setup | EgressPhase::Agent => "agent",
            EgressPhase::Verifier => "verifier",
        }
    }

    /// The proxy socket that serves the phase.
    fn side(self) -> Side {
        match self {
            EgressPhase::Setup | EgressPhase::Agent => Side::Agent,
            EgressPhase::Verifier => Side::Verifier,
        }
    }
}

/// A trial's egress: the proxy, its directory, the relay running for the current phase and the
/// port the container's env names.
pub(super) struct TrialEgress {
    proxy: EgressProxy,
    // Held for the trial's life: each side's socket and relay live in them.
    dir: tempfile::TempDir,
    tests_dir: tempfile::TempDir,
    container_port: u16,
    relay_pid: Option<u32>,
    /// The relay in a separate verifier's container, once it started.
    verifier_relay_pid: Option<u32>,
    /// The step whose phases come next (multi-step tasks), by index.
    step: Option<usize>,
}

impl TrialEgress {
    /// Mounts `side`'s directory (socket and relay) read-only into `spec`'s main service
    /// and points its proxy env at a relay on `port`. The agent's container also gets the
    /// tests' side as a jail-only mount ([`BindMount::tests_egress`]): the jail's helper
    /// starts the tests' relay from it, inside the jail.
    fn add_to(&self, spec: &mut EnvironmentSpec, port: u16, side: Side) {
        let dir = match side {
            Side::Agent => self.dir.path(),
            Side::Verifier => self.tests_dir.path(),
        };
        spec.main.mounts.push(BindMount {
            host: dir.to_path_buf(),
            container: CONTAINER_EGRESS_DIR.to_owned(),
            read_only: true,
            tests_egress: false,
        });
        if side == Side::Agent {
            spec.main.mounts.push(BindMount {
                host: self.tests_dir.path().to_path_buf(),
                container: JAIL_EGRESS_DIR.to_owned(),
                read_only: true,
                tests_egress: true,
            });
        }
        spec.main.env.extend(proxy_env(port));
    }
}

/// True when any phase of the task runs under an allowlist.
pub fn task_uses_allowlist(config: &TaskConfig) -> bool {
    let plans = std::iter::once(NetworkPlan::of(config)).chain(
        config
            .steps
            .iter()
            .map(|step| NetworkPlan::of_step(config, step)),
    );
    plans
        .flat_map(|plan| {
            [plan.agent_baseline, plan.agent_phase, plan.verifier_phase]
                .into_iter()
                .chain(plan.verifier_baseline)
        })
        .any(|mode| mode == NetworkMode::Allowlist)
}

/// The proxy's policy for `phase` of the task (`step` `None`) or of one of its steps. The
/// hosts come from the section whose `network_mode` decided the phase: the step's
/// `[steps.agent]`/`[steps.verifier]`, else the task's `[agent]`/`[verifier]`, else the
/// environment the phase runs in (`[environment]`, or a separate verifier's own).
pub(super) fn phase_policy(
    config: &TaskConfig,
    step: Option<&StepConfig>,
    phase: EgressPhase,
) -> Result<Policy, PhasePolicyError> {
    let plan = NetworkPlan::resolve(config, step);
    // The sections that may decide the phase, the step's first: (mode, hosts, name).
    let mut sections: Vec<PhaseSection> = Vec::new();
    let mode = match phase {
        EgressPhase::Setup => plan.agent_baseline,
        EgressPhase::Agent => {
            if let Some(step) = step {
                sections.push((
                    step.agent.network_mode,
                    &step.agent.allowed_hosts,
                    "steps.agent",
                ));
            }
            sections.push((
                config.agent.network_mode,
                &config.agent.allowed_hosts,
                "agent",
            ));
            plan.agent_phase
        }
        EgressPhase::Verifier => {
            if let Some(step) = step {
                let own = &step.verifier;
                sections.push((own.network_mode, &own.allowed_hosts, "steps.verifier"));
            }
            let task = &config.verifier;
            sections.push((task.network_mode, &task.allowed_hosts, "verifier"));
            plan.verifier_phase
        }
    };
    let declared = sections
        .into_iter()
        .find(|(mode, _, _)| mode.is_some())
        .map(|(_, hosts, name)| (hosts, name.to_owned()));
    let (hosts, section) = match (declared, verifier_environment(config, step)) {
        (Some((hosts, section)), _) => (hosts, section),
        (None, Some(venv))
            if phase == EgressPhase::Verifier && !std::ptr::eq(venv, &config.environment) =>
        {
            let own = step.is_some_and(|s| s.verifier.environment.is_some());
            let section = if own {
                "steps.verifier.environment"
            } else {
                "verifier.environment"
            };
            (&venv.allowed_hosts, section.to_owned())
        }
        (None, _) => (&config.environment.allowed_hosts, "environment".to_owned()),
    };
    Ok(match mode {
        NetworkMode::Public => Policy::Open,
        NetworkMode::NoNetwork => Policy::Closed,
        NetworkMode::Allowlist => Policy::Allow(
            Allowlist::parse(hosts.as_deref().unwrap_or_default())
                .map_err(|source| PhasePolicyError { section, source })?,
        ),
    })
}

/// A phase's `allowed_hosts` that cannot be an allowlist, named by the section that declared
/// them (the task's own validation normally refuses such a task before a trial starts).
#[derive(Debug, thiserror::Error)]
#[error("[{section}] allowed_hosts: {source}")]
pub(super) struct PhasePolicyError {
    /// The section the hosts came from (`agent`, `steps.verifier.environment`, ...).
    section: String,
    /// What is wrong with the list.
    #[source]
    source: AllowlistError,
}

/// A section that may decide a phase's network: its `network_mode`, its `allowed_hosts` and
/// its name for messages.
type PhaseSection<'a> = (Option<NetworkMode>, &'a Option<Vec<String>>, &'static str);

/// The proxy env the container (or the tests) get for a relay on `port`. Loopback stays
/// direct, so the LLM bridge's relay and the task's own local services are not proxied.
fn proxy_env(port: u16) -> BTreeMap<String, String> {
    let url = format!("http://127.0.0.1:{port}");
    let mut env = BTreeMap::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        env.insert(name.to_owned(), url.clone());
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.insert(name.to_owned(), "localhost,127.0.0.1,::1".to_owned());
    }
    env
}

/// A port for a relay, unpredictable to the agent (so a process it leaves cannot sit on the
/// next phase's port in advance) and clear of the usual service ports.
fn random_port() -> u16 {
    20_000 + (uuid::Uuid::new_v4().as_u128() % 40_000) as u16
}

/// A policy as `trial.log` names it.
fn describe(policy: &Policy) -> String {
    match policy {
        Policy::Open => "public (no loopback, link-local or private addresses)".to_owned(),
        Policy::Closed => "closed".to_owned(),
        Policy::Allow(list) => format!("allowlist of {} host(s)", list.entries().len()),
    }
}

fn egress_failure(message: impl Into<String>) -> TrialFailure {
    TrialFailure::new(ExceptionType::EnvironmentError, message)
}

impl<B: Backend> Trial<B> {
    /// Starts the trial's proxy (before the container exists, so its directory can be
    /// mounted) and adds the mount and the proxy env to `spec`. Without an allowlist in the
    /// task, `spec` is returned as it is.
    pub(super) async fn with_egress(
        &mut self,
        mut spec: EnvironmentSpec,
    ) -> Result<EnvironmentSpec, TrialFailure> {
        if !task_uses_allowlist(&self.plan.task.config) {
            return Ok(spec);
        }
        if self.egress.is_none() {
            let resolver = match std::env::var(RESOLVE_ENV) {
                Ok(pins) => Resolver::parse_pins(&pins)
                    .map_err(|e| egress_failure(format!("{RESOLVE_ENV}: {e}")))?,
                Err(_) => Resolver::system(),
            };
            let side_dir = |prefix: &str| {
                let dir = tempfile::Builder::new()
                    .prefix(prefix)
                    .tempdir()
                    .map_err(|e| egress_failure(format!("egress proxy directory: {e}")))?;
                bridge_relay::write_relay(&dir.path().join(bridge_relay::RELAY_FILE_NAME))
                    .map_err(|e| egress_failure(format!("egress relay: {e}")))?;
                Ok::<_, TrialFailure>(dir)
            };
            let dir = side_dir("runner-egress-")?;
            let tests_dir = side_dir("runner-egress-tests-")?;
            let proxy = EgressProxy::start(dir.path(), tests_dir.path(), resolver)
                .await
                .map_err(|e| egress_failure(format!("starting the egress proxy: {e}")))?;
            self.egress = Some(TrialEgress {
                proxy,
                dir,
                tests_dir,
                container_port: random_port(),
                relay_pid: None,
                verifier_relay_pid: None,
                step: None,
            });
        }
        let Some(egress) = &self.egress else {
            return Ok(spec);
        };
        egress.add_to(&mut spec, egress.container_port, Side::Agent);
        Ok(spec)
    }

    /// Sets the proxy's policy and log for `phase`, cutting what the last phase left open.
    /// Nothing without egress.
    pub(super) fn egress_policy(&self, phase: EgressPhase) -> Result<Option<Policy>, TrialFailure> {
        let Some(egress) = &self.egress else {
            return Ok(None);
        };
        let config = &self.plan.task.config;
        let step = egress.step.map(|index| &config.steps[index]);
        let policy =
            phase_policy(config, step, phase).map_err(|e| egress_failure(e.to_string()))?;
        // A step's attempts are logged in its own dir, and counted under `<step>/<phase>`.
        let (dir, name) = match step {
            Some(step) => (
                self.dir.join("steps").join(&step.name),
                format!("{}/{}", step.name, phase.name()),
            ),
            None => (self.dir.clone(), phase.name().to_owned()),
        };
        let log = dir.join(phase.log_dir()).join("network.jsonl");
        egress
            .proxy
            .set_phase(phase.side(), &name, policy.clone(), Some(log));
        Ok(Some(policy))
    }

    /// Enters `phase`: the proxy takes the phase's policy ([`Self::egress_policy`]), the
    /// agent's relay in the container stops and, for a setup or agent phase, a fresh one
    /// starts. The tests' relay is not started here: it runs inside the verifier jail (its
    /// helper starts it from the jail-only mount and gives the tests its port), where no
    /// process the agent left can reach its socket, and refuses connections from outside the
    /// jail. Nothing without egress.
    pub(super) async fn egress_phase(&mut self, phase: EgressPhase) -> Result<(), TrialFailure> {
        let Some(policy) = self.egress_policy(phase)? else {
            return Ok(());
        };
        let Some(egress) = &self.egress else {
            return Ok(());
        };
        let port = egress.container_port;
        let previous = egress.relay_pid;
        let sandbox = self.sandbox()?;
        if let Some(pid) = previous {
            relay::stop_relay(&sandbox, pid, RELAY_PID).await;
        }
        if let Some(egress) = &mut self.egress {
            egress.relay_pid = None;
        }
        if phase == EgressPhase::Verifier {
            self.log.line(&format!(
                "egress proxy: verifier phase {}, relay in the verifier jail (the agent's relay stopped, its socket closed)",
                describe(&policy)
            ));
            return Ok(());
        }
        let pid = self
            .start_egress_relay(&sandbox, phase, port, &policy)
            .await?;
        if let Some(egress) = &mut self.egress {
            egress.relay_pid = Some(pid);
        }
        Ok(())
    }

    /// Adds the proxy's mount and env to the spec of a separate verifier's container (which
    /// starts with neither) and returns the port its relay will take; `None` without egress.
    pub(super) fn with_separate_verifier_egress(&self, spec: &mut EnvironmentSpec) -> Option<u16> {
        let egress = self.egress.as_ref()?;
        let port = random_port();
        egress.add_to(spec, port, Side::Verifier);
        Some(port)
    }

    /// Enters the verifier phase in a separate verifier's container (`sandbox`): the proxy
    /// takes the phase's policy and the relay starts on `port`. The container is removed after
    /// the tests, relay and all.
    pub(super) async fn egress_separate_verifier<S: Sandbox>(
        &mut self,
        sandbox: &S,
        port: u16,
    ) -> Result<(), TrialFailure> {
        let Some(policy) = self.egress_policy(EgressPhase::Verifier)? else {
            return Ok(());
        };
        let pid = self
            .start_egress_relay(sandbox, EgressPhase::Verifier, port, &policy)
            .await?;
        if let Some(egress) = &mut self.egress {
            egress.verifier_relay_pid = Some(pid);
        }
        Ok(())
    }

    async fn start_egress_relay<S: Sandbox>(
        &self,
        sandbox: &S,
        phase: EgressPhase,
        port: u16,
        policy: &Policy,
    ) -> Result<u32, TrialFailure> {
        let relay = format!("{CONTAINER_EGRESS_DIR}/{}", bridge_relay::RELAY_FILE_NAME);
        let socket = format!("{CONTAINER_EGRESS_DIR}/{}", egress::SOCKET_FILE_NAME);
        let serve = bridge_relay::relay_serve_command(&relay, &socket, port);
        let wait = bridge_relay::relay_wait_command(&relay, port, RELAY_WAIT_MS);
        let pid = relay::start_relay(sandbox, &serve, &wait, RELAY_LOG, RELAY_PID)
            .await
            .map_err(|e| {
                TrialFailure::new(
                    ExceptionType::EnvironmentError,
                    format!("egress proxy for the {} phase: {e}", phase.name()),
                )
            })?;
        self.log.line(&format!(
            "egress proxy: {} phase {}, relay on 127.0.0.1:{port}",
            phase.name(),
            describe(policy)
        ));
        Ok(pid)
    }

    /// Makes the phases that follow those of step `index` (`None`: the task's own).
    pub(super) fn egress_step(&mut self, index: Option<usize>) {
        if let Some(egress) = &mut self.egress {
            egress.step = index;
        }
    }

    /// The pids of the runner's relays in the containers the tests may run in (the agent's
    /// and a separate verifier's), so they are not counted as the agent's leftovers.
    pub(super) fn egress_relay_pids(&self) -> Vec<u32> {
        self.egress
            .iter()
            .flat_map(|e| [e.relay_pid, e.verifier_relay_pid])
            .flatten()
            .collect()
    }

    /// Stops the relay, closes the proxy and records its counts (runner-only
    /// `network_attempts` in `result.json`). Safe to call twice.
    pub(super) async fn close_egress(&mut self) {
        let Some(egress) = self.egress.take() else {
            return;
        };
        if let (Some(pid), Ok(sandbox)) = (egress.relay_pid, self.sandbox()) {
            relay::stop_relay(&sandbox, pid, RELAY_PID).await;
        }
        let counts = egress.proxy.counts();
        for (phase, count) in &counts {
            self.log.line(&format!(
                "egress proxy: {phase}: {} attempt(s), {} refused",
                count.attempts, count.refused
            ));
        }
        let counts = counts.into_iter().map(|(phase, c)| {
            let recorded = tasks::records::NetworkAttempts {
                attempts: c.attempts,
                refused: c.refused,
            };
            (phase, recorded)
        });
        self.result.network_attempts = Some(counts.collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tasks::config::parse_task_config;

    fn config(toml: &str) -> TaskConfig {
        parse_task_config(std::path::Path::new("task.toml"), toml)
            .unwrap()
            .config
    }

    #[test]
    fn each_phase_takes_the_hosts_of_the_section_that_decided_it() {
        let task = config(
            "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"env.test\"]\n\
             [agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"agent.test\"]\n\
             [verifier]\nnetwork_mode = \"public\"\n",
        );
        assert!(task_uses_allowlist(&task));
        let allows = |phase, host: &str| match phase_policy(&task, None, phase).unwrap() {
            Policy::Allow(_) => matches!(
                phase_policy(&task, None, phase)
                    .unwrap()
                    .decide_host(host, 443, false),
                egress::Decision::Allow { .. }
            ),
            other => panic!("{other:?}"),
        };
        assert!(allows(EgressPhase::Setup, "env.test"));
        assert!(!allows(EgressPhase::Setup, "agent.test"));
        assert!(allows(EgressPhase::Agent, "agent.test"));
        assert!(!allows(EgressPhase::Agent, "env.test"));
        assert_eq!(
            phase_policy(&task, None, EgressPhase::Verifier).unwrap(),
            Policy::Open
        );
        let inherited = config(
            "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"env.test\"]\n\
             [verifier]\nnetwork_mode = \"no-network\"\n",
        );
        assert!(matches!(
            phase_policy(&inherited, None, EgressPhase::Agent).unwrap(),
            Policy::Allow(_)
        ));
        assert_eq!(
            phase_policy(&inherited, None, EgressPhase::Verifier).unwrap(),
            Policy::Closed
        );
        assert!(!task_uses_allowlist(&config(
            "[agent]\nnetwork_mode = \"no-network\"\n"
        )));
    }

    #[test]
    fn the_proxy_env_keeps_loopback_direct() {
        let env = proxy_env(3128);
        assert_eq!(env["https_proxy"], "http://127.0.0.1:3128");
        assert_eq!(env["HTTP_PROXY"], "http://127.0.0.1:3128");
        assert!(env["NO_PROXY"].contains("127.0.0.1"));
        assert!((20_000..60_000).contains(&random_port()));
    }
}
