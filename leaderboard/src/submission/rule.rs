//! The submission rules, by the names reports use.

use serde::Serialize;

/// One leaderboard rule; names follow Harbor's static validation where it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Job configs keep default timeouts and resources.
    NoJobOverrides,
    /// Every trial's own config keeps default timeouts and resources.
    NoTrialOverrides,
    /// Every trial finished with rewards or a recorded exception.
    TrialResultsComplete,
    /// Every trial's agent and model match a named entry of its job's `agents[]`.
    AgentConfigMatch,
    /// Every task has enough trials.
    MinTrialsPerTask,
    /// Every trial ran the dataset's exact task content.
    CorrectTaskVersions,
    /// Every trial of a task ran on the same image.
    SameTaskImage,
    /// Every rewarded trial has a valid ATIF trajectory.
    PassingTrialTrajectories,
    /// No trial's tests ran where the agent's leftovers could reach them.
    VerifierIsolated,
    /// Every model a trial called through the LLM bridge is one its job declares.
    DeclaredModelsOnly,
    /// No job let credentials into containers.
    NoContainerSecrets,
    /// No file holds a provider-key-shaped string.
    NoProviderKeys,
    /// `metadata.yaml` has the required fields.
    MetadataFormattedCorrectly,
}

impl Rule {
    /// Every rule, in report order.
    pub const ALL: [Rule; 13] = [
        Rule::NoJobOverrides,
        Rule::NoTrialOverrides,
        Rule::TrialResultsComplete,
        Rule::AgentConfigMatch,
        Rule::MinTrialsPerTask,
        Rule::CorrectTaskVersions,
        Rule::SameTaskImage,
        Rule::PassingTrialTrajectories,
        Rule::VerifierIsolated,
        Rule::DeclaredModelsOnly,
        Rule::NoContainerSecrets,
        Rule::NoProviderKeys,
        Rule::MetadataFormattedCorrectly,
    ];

    /// The rule's stable name.
    pub fn name(self) -> &'static str {
        match self {
            Rule::NoJobOverrides => "no_job_overrides",
            Rule::NoTrialOverrides => "no_trial_overrides",
            Rule::TrialResultsComplete => "trial_results_complete",
            Rule::AgentConfigMatch => "agent_config_match",
            Rule::MinTrialsPerTask => "min_trials_per_task",
            Rule::CorrectTaskVersions => "correct_task_versions",
            Rule::SameTaskImage => "same_task_image",
            Rule::PassingTrialTrajectories => "passing_trial_trajectories",
            Rule::VerifierIsolated => "verifier_isolated",
            Rule::DeclaredModelsOnly => "declared_models_only",
            Rule::NoContainerSecrets => "no_container_secrets",
            Rule::NoProviderKeys => "no_provider_keys",
            Rule::MetadataFormattedCorrectly => "metadata_formatted_correctly",
        }
    }

    /// What the rule requires, in one line.
    pub fn description(self) -> &'static str {
        match self {
            Rule::NoJobOverrides => "job configs keep default timeouts, multipliers and resources",
            Rule::NoTrialOverrides => {
                "every trial's config keeps default timeouts, multipliers and resources"
            }
            Rule::TrialResultsComplete => {
                "every trial has a result.json with finished_at and rewards or an exception"
            }
            Rule::AgentConfigMatch => {
                "every trial's agent name and model match a named entry of the job's agents[]"
            }
            Rule::MinTrialsPerTask => {
                "every task has at least the minimum number of trials across all jobs"
            }
            Rule::CorrectTaskVersions => {
                "every trial's task ref equals the dataset's content digest for that task"
            }
            Rule::SameTaskImage => {
                "every trial of a task ran on the same image (the image ids runner's lock.json records)"
            }
            Rule::PassingTrialTrajectories => {
                "every trial with reward > 0 has an agent/trajectory.json that is valid ATIF"
            }
            Rule::VerifierIsolated => {
                "no trial's tests ran unisolated from what the agent left (runner's verifier_isolation.isolated: false; records that do not say, as Harbor's, pass)"
            }
            Rule::DeclaredModelsOnly => {
                "every model a trial called through the LLM bridge is one its job declares (agents[].model_name or models)"
            }
            Rule::NoContainerSecrets => "no job opted in to passing credentials into containers",
            Rule::NoProviderKeys => {
                "no file in the job dirs holds a string shaped like a provider API key"
            }
            Rule::MetadataFormattedCorrectly => "metadata.yaml has every required field",
        }
    }
}
