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
