//! The submission rules, by the names reports use, and the verdict each one counts toward.
//!
//! Adding a rule: a variant here, its place in [`Rule::ALL`], its name and description; it
//! counts toward the leaderboard verdict unless [`Rule::verdict`] names it as evidence.

use serde::Serialize;

/// Which verdict a rule counts toward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// What the leaderboard itself checks (Harbor's validator, the published rules) and the
    /// anti-gaming checks any honest submission passes: it decides the exit code by default.
    Leaderboard,
    /// What only runner records (isolation, toolchain, metering, images): a Harbor-written
    /// job has none of it ("not recorded"); decides the exit code with `--require-evidence`.
    Evidence,
}

/// One leaderboard rule; names follow Harbor's static validation where it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Job configs keep default timeouts and resources.
    NoJobOverrides,
    /// Every trial's own config keeps default timeouts and resources.
    NoTrialOverrides,
    /// Every job config names its dataset (Harbor's "datasets list is empty").
    DatasetConfig,
    /// Every trial finished with rewards or a recorded exception.
    TrialResultsComplete,
    /// Each trial is submitted once, whatever paths point at it.
    UniqueTrials,
    /// Every trial a job's `lock.json` planned is present, and no other.
    PlannedTrials,
    /// Every trial's agent and model match a named entry of its job's `agents[]`.
    AgentConfigMatch,
    /// One agent (name, version, model) across every job and trial of the submission.
    OneAgent,
    /// Every task has enough trials.
    MinTrialsPerTask,
    /// Every trial ran the dataset's exact task content.
    CorrectTaskVersions,
    /// Every trial of a task ran on the same image.
    SameTaskImage,
    /// Every rewarded trial has a valid ATIF trajectory.
    PassingTrialTrajectories,
    /// Every reward is a finite number, the main one within [0, 1].
    RewardsInRange,
    /// No rewarded trial's record shows its tests ran unisolated or with programs the agent
    /// changed: that reward is not the task's.
    UncompromisedRewards,
    /// No trial's tests ran where the agent's leftovers could reach them.
    VerifierIsolated,
    /// No trial's tests ran with programs the agent changed.
    VerifierToolchain,
    /// Every model a trial called through the LLM bridge is one its job declares.
    DeclaredModelsOnly,
    /// Every trial of a job that declares a model was metered by runner's LLM bridge.
    BridgeMetering,
    /// No job let credentials into containers.
    NoContainerSecrets,
    /// No file holds a provider-key-shaped string.
    NoProviderKeys,
    /// `metadata.yaml` has the required fields.
    MetadataFormattedCorrectly,
    /// Every trial's records are what runner hashed as the trial ended (`records.rs`).
    RecordsUnchanged,
    /// Every trajectory is its own trial's (`binding.rs`).
    TrajectoriesBound,
    /// Every job is signed by a `--trusted-key` (`records.rs`).
    TrustedSignature,
}

impl Rule {
    /// Every rule, in report order.
    pub const ALL: [Rule; 24] = [
        Rule::NoJobOverrides,
        Rule::NoTrialOverrides,
        Rule::DatasetConfig,
        Rule::TrialResultsComplete,
        Rule::UniqueTrials,
        Rule::PlannedTrials,
        Rule::AgentConfigMatch,
        Rule::OneAgent,
        Rule::MinTrialsPerTask,
        Rule::CorrectTaskVersions,
        Rule::PassingTrialTrajectories,
        Rule::RewardsInRange,
        Rule::UncompromisedRewards,
        Rule::NoContainerSecrets,
        Rule::NoProviderKeys,
        Rule::MetadataFormattedCorrectly,
        Rule::VerifierIsolated,
        Rule::VerifierToolchain,
        Rule::DeclaredModelsOnly,
        Rule::SameTaskImage,
        Rule::BridgeMetering,
        Rule::RecordsUnchanged,
        Rule::TrajectoriesBound,
        Rule::TrustedSignature,
    ];

    /// The verdict the rule counts toward.
    pub fn verdict(self) -> Verdict {
        match self {
            Rule::VerifierIsolated
            | Rule::VerifierToolchain
            | Rule::DeclaredModelsOnly
            | Rule::SameTaskImage
            | Rule::BridgeMetering => Verdict::Evidence,
            _ => Verdict::Leaderboard,
        }
    }

    /// The rule's stable name.
    pub fn name(self) -> &'static str {
        match self {
            Rule::NoJobOverrides => "no_job_overrides",
            Rule::NoTrialOverrides => "no_trial_overrides",
            Rule::DatasetConfig => "dataset_config",
            Rule::TrialResultsComplete => "trial_results_complete",
            Rule::UniqueTrials => "unique_trials",
            Rule::PlannedTrials => "planned_trials",
            Rule::OneAgent => "one_agent",
            Rule::RewardsInRange => "rewards_in_range",
            Rule::AgentConfigMatch => "agent_config_match",
            Rule::MinTrialsPerTask => "min_trials_per_task",
            Rule::CorrectTaskVersions => "correct_task_versions",
            Rule::SameTaskImage => "same_task_image",
            Rule::PassingTrialTrajectories => "passing_trial_trajectories",
            Rule::UncompromisedRewards => "uncompromised_rewards",
            Rule::VerifierIsolated => "verifier_isolated",
            Rule::VerifierToolchain => "verifier_toolchain",
            Rule::BridgeMetering => "bridge_metering",
            Rule::DeclaredModelsOnly => "declared_models_only",
            Rule::NoContainerSecrets => "no_container_secrets",
            Rule::NoProviderKeys => "no_provider_keys",
            Rule::MetadataFormattedCorrectly => "metadata_formatted_correctly",
            Rule::RecordsUnchanged => "records_unchanged",
            Rule::TrajectoriesBound => "trajectories_bound",
            Rule::TrustedSignature => "trusted_signature",
        }
    }

    /// What the rule requires, in one line.
    pub fn description(self) -> &'static str {
        match self {
            Rule::NoJobOverrides => "job configs keep default timeouts, multipliers and resources",
            Rule::NoTrialOverrides => {
                "every trial's config keeps default timeouts, multipliers and resources"
            }
            Rule::DatasetConfig => {
                "every job config names the dataset it ran (Harbor's rule: \"datasets list is empty\" fails)"
            }
            Rule::TrialResultsComplete => {
                "every trial has a result.json with finished_at and rewards or an exception"
            }
            Rule::UniqueTrials => {
                "each trial (job id and trial name) is submitted once, whatever paths point at it"
            }
            Rule::PlannedTrials => {
                "every trial each job's lock.json planned is present, and no trial it did not plan"
            }
            Rule::OneAgent => {
                "one agent (name, version, model) across every job and trial of the submission"
            }
            Rule::RewardsInRange => {
                "every reward is a finite number, and the main reward lies within [0, 1]"
            }
            Rule::AgentConfigMatch => {
                "every trial records agent_info, and its agent name and model match a named entry of the job's agents[]"
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
            Rule::UncompromisedRewards => {
                "no rewarded trial's record shows its tests ran unisolated (verifier_isolation.isolated: false) or with programs the agent changed (--agent-toolchain): that reward is not the task's"
            }
            Rule::VerifierIsolated => {
                "every trial's tests ran isolated from what the agent left (runner's verifier_isolation.isolated: true; Harbor's records do not say)"
            }
            Rule::VerifierToolchain => {
                "every trial's tests ran with the image's own programs and startup hooks, not ones the agent changed (runner's verifier_isolation.toolchain)"
            }
            Rule::BridgeMetering => {
                "every trial of a job that declares a model was metered by runner's LLM bridge (agent_result.metadata.llm_bridge)"
            }
            Rule::DeclaredModelsOnly => {
                "every model a trial called through the LLM bridge is one its job declares (agents[].model_name or models)"
            }
            Rule::NoContainerSecrets => "no job opted in to passing credentials into containers",
            Rule::NoProviderKeys => {
                "no file in the job dirs holds a string shaped like a provider API key"
            }
            Rule::MetadataFormattedCorrectly => "metadata.yaml has every required field",
            Rule::RecordsUnchanged => {
                "every trial's files (result, rewards, verifier output, trajectory) and the job's config.json and lock.json are what runner hashed into record_manifest.jsonl as each trial ended, and the manifest is what record_manifest.sig signed (Harbor's jobs keep no manifest: not recorded)"
            }
            Rule::TrajectoriesBound => {
                "every agent/trajectory.json is its trial's own: its agent and model are the trial's agent_info, no two trials hold the same session, and (with --dataset) its first user message holds the task's instruction"
            }
            Rule::TrustedSignature => {
                "every job's record manifest is signed (runner run --signing-key) by a key given with --trusted-key"
            }
        }
    }
}
