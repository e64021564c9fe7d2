//! runner's evidence, judged as its own verdict: `verifier_isolated`, `verifier_toolchain`,
//! `bridge_metering`, and the "not recorded" notes of `declared_models_only` and
//! `same_task_image` (their failures come from `models.rs` and `images.rs`). Harbor's records
//! say none of it, so a Harbor-written job gets one "not recorded" note per job and rule, never
//! a failure; what runner's records show wrong fails.
//!
//! One leaderboard rule lives here too, `uncompromised_rewards`: a rewarded trial whose own
//! record shows its tests ran unisolated or with programs the agent changed. That reward is not
//! the task's, so it fails the leaderboard verdict whatever was asked.

use super::Rule;
use super::job::Job;
use super::report::{Violation, trials_by_offence, trials_named};
use super::trial::{Isolation, TrialFacts};

/// Every evidence violation and note, and the `uncompromised_rewards` violations.
pub fn check(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let mut violations = uncompromised_rewards(trials);
    violations.extend(isolation(jobs, trials));
    violations.extend(toolchain(jobs, trials));
    violations.extend(metering(jobs, trials));
    violations.extend(images_not_recorded(jobs, trials));
    violations
}

fn result_file(trial: &TrialFacts) -> Option<String> {
    Some(format!("{}/result.json", trial.display))
}

/// One `uncompromised_rewards` violation per rewarded trial whose record shows compromise.
fn uncompromised_rewards(trials: &[TrialFacts]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for trial in trials.iter().filter(|t| t.rewarded()) {
        let reward = trial.reward.unwrap_or_default();
        if let Isolation::Unisolated(why) = &trial.isolation {
            violations.push(Violation::new(
                Rule::UncompromisedRewards,
                result_file(trial),
                format!("reward {reward}, but {why}"),
            ));
        }
        if let Some(why) = &trial.agent_toolchain {
            violations.push(Violation::new(
                Rule::UncompromisedRewards,
                result_file(trial),
                format!("reward {reward}, but {why}"),
            ));
        }
    }
    violations
}

/// The "not recorded" note of `rule` for each job some of whose trials `silent` picks.
fn not_recorded_per_job(
    rule: Rule,
    jobs: &[Job],
    trials: &[TrialFacts],
    silent: impl Fn(&TrialFacts) -> bool,
    what: &str,
) -> Vec<Violation> {
    trials_by_offence(trials, |t| silent(t).then_some(()))
        .into_iter()
        .map(|((job, ()), names)| {
            Violation::not_recorded(
                rule,
                Some(jobs[job].display.clone()),
                format!("not recorded: {} {what}", trials_named(&names)),
            )
        })
        .collect()
}

fn isolation(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let mut violations: Vec<Violation> = trials
        .iter()
        .filter_map(|t| match &t.isolation {
            Isolation::Unisolated(why) => Some(Violation::new(
                Rule::VerifierIsolated,
                result_file(t),
                why.clone(),
            )),
            _ => None,
        })
        .collect();
    violations.extend(not_recorded_per_job(
        Rule::VerifierIsolated,
        jobs,
        trials,
        |t| t.isolation == Isolation::NotRecorded,
        "record no verifier_isolation: nothing says their tests ran where the agent's leftovers could not reach them (Harbor's records never say; runner's do)",
    ));
    violations
}

fn toolchain(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let mut violations: Vec<Violation> = trials
        .iter()
        .filter_map(|t| {
            let why = t.agent_toolchain.as_ref()?;
            Some(Violation::new(
                Rule::VerifierToolchain,
                result_file(t),
                why.clone(),
            ))
        })
        .collect();
    violations.extend(not_recorded_per_job(
        Rule::VerifierToolchain,
        jobs,
        trials,
        |t| t.isolation == Isolation::NotRecorded,
        "record no verifier_isolation.toolchain: nothing says their tests ran with the image's own programs (Harbor's records never say; runner's do)",
    ));
    violations
}

/// True when the trial's job declares a model: then the bridge had something to meter.
fn declares_a_model(job: &Job) -> bool {
    job.agents
        .iter()
        .any(|a| a.model.is_some() || !a.models.is_empty())
}

/// `bridge_metering` and `declared_models_only`'s notes: trials of a job that declares a model
/// with no bridge metering recorded cannot show which models they called.
fn metering(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let unmetered = |t: &TrialFacts| declares_a_model(&jobs[t.job]) && t.models_called.is_none();
    let mut violations = not_recorded_per_job(
        Rule::BridgeMetering,
        jobs,
        trials,
        unmetered,
        "record no LLM bridge metering (agent_result.metadata.llm_bridge), though their job declares a model (runner meters the calls an agent makes through its LLM bridge)",
    );
    violations.extend(not_recorded_per_job(
        Rule::DeclaredModelsOnly,
        jobs,
        trials,
        unmetered,
        "record no models called through runner's LLM bridge, so the models they called cannot be checked against the declared ones",
    ));
    violations
}

/// `same_task_image`'s notes: jobs whose lock records no image for their trials (Harbor's).
fn images_not_recorded(jobs: &[Job], trials: &[TrialFacts]) -> Vec<Violation> {
    let recorded = |t: &TrialFacts| jobs[t.job].images.iter().any(|i| i.trial == t.name);
    not_recorded_per_job(
        Rule::SameTaskImage,
        jobs,
        trials,
        |t| !recorded(t),
        "have no image id in their job's lock.json (Harbor's locks record none; runner's do), so their images cannot be compared",
    )
}
