//! `agent_config_match`: each trial's `agent_info` must match a named entry of its job's
//! `agents[]` (docs/harbor-format.md §6.2 item 4, "Valid source_filter"). Reported once per job and agent,
//! with the trial count, so a 10k-trial job does not print 10k lines.

use super::Rule;
use super::job::Job;
use super::report::{Violation, trials_by_offence, trials_named};
use super::trial::TrialFacts;

/// Violations of `agent_config_match` over all trials.
pub fn check(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let unmatched = trials_by_offence(trials, |trial| {
        let agent = trial.agent.as_ref()?;
        let matched = jobs[trial.job]
            .agents
            .iter()
            .any(|a| a.name.as_deref() == Some(agent.name.as_str()) && a.model == agent.model);
        (!matched).then_some(agent)
    });
    unmatched
        .into_iter()
        .map(|((job_index, agent), names)| {
            let job = &jobs[job_index];
            let model = agent.model.as_deref().unwrap_or("(no model)");
            let trials = trials_named(&names);
            let message = if let Some(i) = job.agents.iter().position(|a| a.name.is_none()) {
                format!(
                    "{trials} ran agent `{}` with model `{model}`, but the job config's agents[{i}].name is null: \
                     the job was launched without a named agent config (e.g. a bare --agent-import-path), so its \
                     trials cannot be attributed; relaunch from a named agent config whose name is `{}`",
                    agent.name, agent.name
                )
            } else {
                let listed: Vec<String> = job
                    .agents
                    .iter()
                    .map(|a| format!("{}/{}", a.name.as_deref().unwrap_or("null"), a.model.as_deref().unwrap_or("null")))
                    .collect();
                format!(
                    "{trials} ran agent `{}` with model `{model}`, but no entry of the job config's agents[] has that \
                     name and model_name (agents[]: {}); launch the run from an agent config whose name and model \
                     match what the agent reports",
                    agent.name,
                    if listed.is_empty() { "empty".to_owned() } else { listed.join(", ") }
                )
            };
            Violation::new(Rule::AgentConfigMatch, Some(format!("{}/config.json", job.display)), message)
        })
        .collect()
}

/// Violations of `one_agent`: a submission is one agent (name, version and model) in every
/// job config and every trial; another agent's trials cannot be mixed in.
pub fn check_one_agent(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut in_trials: std::collections::BTreeMap<(String, String, String), usize> =
        std::collections::BTreeMap::new();
    for trial in trials {
        if let Some(agent) = &trial.agent {
            let key = (
                agent.name.clone(),
                trial
                    .agent_version
                    .clone()
                    .unwrap_or_else(|| "(no version)".into()),
                agent.model.clone().unwrap_or_else(|| "(no model)".into()),
            );
            *in_trials.entry(key).or_default() += 1;
        }
    }
    if in_trials.len() > 1 {
        let listed: Vec<String> = in_trials
            .iter()
            .map(|((name, version, model), n)| {
                format!("{name} {version} with {model} ({n} trials)")
            })
            .collect();
        violations.push(Violation::new(
            Rule::OneAgent,
            None,
            format!(
                "the trials ran {} agents: {}; a submission is one agent, version and model, so submit each separately",
                in_trials.len(),
                listed.join("; ")
            ),
        ));
    }
    let in_configs: std::collections::BTreeSet<(Option<&str>, Option<&str>)> = jobs
        .iter()
        .flat_map(|j| j.agents.iter())
        .map(|a| (a.name.as_deref(), a.model.as_deref()))
        .collect();
    if in_configs.len() > 1 {
        let listed: Vec<String> = in_configs
            .iter()
            .map(|(name, model)| format!("{}/{}", name.unwrap_or("null"), model.unwrap_or("null")))
            .collect();
        violations.push(Violation::new(
            Rule::OneAgent,
            jobs.first().map(|j| format!("{}/config.json", j.display)),
            format!(
                "the job configs name {} agents (agents[] name/model_name: {}); a submission is the jobs of one agent",
                in_configs.len(),
                listed.join(", ")
            ),
        ));
    }
    violations
}

/// The agent a submission is of, as its trials' `agent_info` says: the most common identity
/// (the only one when `one_agent` passes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct SubmittedAgent {
    /// `agent_info.name`.
    pub name: String,
    /// `agent_info.version`, when recorded.
    pub version: Option<String>,
    /// The model as `provider/name` (bare name without a provider), when recorded.
    pub model: Option<String>,
}

/// The submission's agent; `None` when no trial records one.
pub fn submitted(trials: &[TrialFacts]) -> Option<SubmittedAgent> {
    let mut counts: std::collections::BTreeMap<SubmittedAgent, usize> = Default::default();
    for trial in trials {
        let Some(agent) = &trial.agent else { continue };
        let key = SubmittedAgent {
            name: agent.name.clone(),
            version: trial.agent_version.clone(),
            model: agent.model.clone(),
        };
        *counts.entry(key).or_default() += 1;
    }
    // The most trials wins; among equals, the first in order, so the choice is stable.
    let best = counts.values().copied().max()?;
    counts.into_iter().find(|(_, n)| *n == best).map(|(a, _)| a)
}
