//! `declared_models_only` and the models each job actually called: a job run through runner's
//! LLM bridge records, per trial, the declared models that were called
//! (`agent_result.metadata.llm_bridge.models_called`); a trial that called a model its job
//! does not declare (`agents[].model_name`, and runner's `agents[].models`, the list the
//! bridge allowed) is flagged, once per job and model, so a
//! "single-model" claim is checked rather than trusted.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::Rule;
use super::job::Job;
use super::report::{Violation, trials_by_offence, trials_named};
use super::trial::TrialFacts;

/// The models one job declared and called.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct JobModels {
    /// The job dir as given.
    pub job: String,
    /// `agents[].model_name` and `agents[].models` of the job config.
    pub declared: Vec<String>,
    /// Models its trials called through the bridge (the union over trials).
    pub called: Vec<String>,
    /// Trials with bridge metering (the others called no model through the bridge, or ran
    /// without one).
    pub n_metered_trials: usize,
}

/// Per job with any metered trial: what it declared and called.
pub fn per_job(jobs: &[Job], trials: &[TrialFacts]) -> Vec<JobModels> {
    let mut called: BTreeMap<usize, (BTreeSet<&str>, usize)> = BTreeMap::new();
    for trial in trials {
        if let Some(models) = &trial.models_called {
            let entry = called.entry(trial.job).or_default();
            entry.0.extend(models.iter().map(String::as_str));
            entry.1 += 1;
        }
    }
    called
        .into_iter()
        .map(|(i, (models, n))| JobModels {
            job: jobs[i].display.clone(),
            declared: declared(&jobs[i]).into_iter().map(str::to_owned).collect(),
            called: models.into_iter().map(str::to_owned).collect(),
            n_metered_trials: n,
        })
        .collect()
}

fn declared(job: &Job) -> BTreeSet<&str> {
    job.agents
        .iter()
        .flat_map(|a| a.model.iter().chain(&a.models))
        .map(String::as_str)
        .collect()
}

/// Violations of `declared_models_only`: one per job and undeclared model.
pub fn check(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let offending = trials_by_offence(trials, |trial| {
        let allowed = declared(&jobs[trial.job]);
        let models = trial.models_called.as_deref().unwrap_or_default();
        models
            .iter()
            .map(String::as_str)
            .filter(|m| !allowed.contains(m))
            .collect::<Vec<_>>()
    });
    offending
        .into_iter()
        .map(|((i, model), names)| {
            let job = &jobs[i];
            let declared: Vec<&str> = declared(job).into_iter().collect();
            let trials = trials_named(&names);
            Violation::new(
                Rule::DeclaredModelsOnly,
                Some(format!("{}/config.json", job.display)),
                format!(
                    "{trials} called model `{model}`, which the job does not declare (agents[].model_name and models: {}); \
                     a submission's trials may call only its declared model",
                    if declared.is_empty() { "none".to_owned() } else { declared.join(", ") }
                ),
            )
        })
        .collect()
}
