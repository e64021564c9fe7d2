//! `<trial>/result.json`: Harbor's `TrialResult`, plus runner-only fields Harbor ignores.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::containment::{LeftoverProcess, TruncatedOutput, VerifierIsolation};
use super::trial_config::TrialConfig;
use crate::error_policy::{ErrorPolicy, ErrorPolicyOverride};
use crate::exception::{ExceptionType, first_line};
use crate::outcome::TrialOutcome;

/// Agent identity as recorded per trial.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AgentInfo {
    /// Must equal the job config's `agents[].name`.
    pub name: String,
    /// `"unknown"` when the agent reports none.
    pub version: String,
    /// The model, split at the first `/`.
    pub model_info: Option<ModelInfo>,
}

/// `provider/name` split.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    /// Model name.
    pub name: String,
    /// Provider, if the model name had one.
    pub provider: Option<String>,
}

impl ModelInfo {
    /// Splits `provider/name` at the first `/`.
    pub fn from_model_name(model: &str) -> ModelInfo {
        match model.split_once('/') {
            Some((provider, name)) => ModelInfo {
                name: name.to_owned(),
                provider: Some(provider.to_owned()),
            },
            None => ModelInfo {
                name: model.to_owned(),
                provider: None,
            },
        }
    }
}

/// Harbor's `AgentContext`: token counts and cost as the agent reports them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AgentContext {
    /// Input tokens including cached ones.
    pub n_input_tokens: Option<u64>,
    /// Cached input tokens.
    pub n_cache_tokens: Option<u64>,
    /// Output tokens.
    pub n_output_tokens: Option<u64>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
    /// Tokens and cost by model name, as the agent reported them or (Harbor 0.26's backfill)
    /// summed from its trajectory by [`crate::atif::model_usage`]; `null` when neither says.
    #[serde(default)]
    pub model_usage: Option<BTreeMap<String, ModelUsage>>,
    /// Rollout details (unused).
    pub rollout_details: Option<serde_json::Value>,
    /// Free-form agent metadata (final status, exit codes).
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Harbor 0.26's `ModelUsage`: one model's share of an agent's tokens and cost
/// (`n_input_tokens` includes cached tokens, as on [`AgentContext`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ModelUsage {
    /// Input tokens including cached ones.
    #[serde(default)]
    pub n_input_tokens: u64,
    /// Cached input tokens.
    #[serde(default)]
    pub n_cache_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub n_output_tokens: u64,
    /// Cost in USD; `None` when any of the model's token-bearing steps had no cost.
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// One phase's connection attempts through the egress proxy (runner-only).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct NetworkAttempts {
    /// Every attempt, allowed or not.
    pub attempts: u64,
    /// Attempts refused by the allowlist (or failing to connect).
    pub refused: u64,
}

/// A check the verifier reported by name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NamedCheck {
    /// The test's name.
    pub name: String,
    /// `passed`, `failed`, `skipped`, `error`, ...
    pub status: String,
}

/// Harbor's `VerifierResult`, with runner extras (Harbor readers ignore unknown keys).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VerifierResult {
    /// Reward name → value.
    pub rewards: Option<BTreeMap<String, f64>>,
    /// The test script's exit code (recorded, never used for the reward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_exit_code: Option<i64>,
    /// Named checks from CTRF or pytest output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Vec<NamedCheck>>,
    /// Checks that passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertions_passed: Option<u32>,
    /// Checks in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertions_total: Option<u32>,
}

/// The first exception a trial recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExceptionInfo {
    /// Harbor's exception class name, e.g. `AgentTimeoutError`.
    pub exception_type: ExceptionType,
    /// What happened and what to do.
    pub exception_message: String,
    /// Where it happened (a phase trace, not a Python traceback).
    pub exception_traceback: String,
    /// When.
    pub occurred_at: DateTime<Utc>,
    /// Harbor 0.26's policy for this type (its `ExceptionInfo.policy`), written by runner as
    /// 0.26 computes it; absent in older records. Runner's own verdict is the trial's
    /// `outcome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ErrorPolicy>,
    /// The job's `override_error_policy` entry for this type, when it has one (Harbor 0.26's
    /// `ExceptionInfo.policy_override`); `policy` is computed with it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_override: Option<ErrorPolicyOverride>,
}

impl ExceptionInfo {
    /// `Type: first line of the message`, as one-line reports show the exception.
    pub fn headline(&self) -> String {
        format!(
            "{}: {}",
            self.exception_type,
            first_line(&self.exception_message)
        )
    }
}

/// Start and end of one phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseTiming {
    /// Phase start.
    pub started_at: Option<DateTime<Utc>>,
    /// Phase end.
    pub finished_at: Option<DateTime<Utc>>,
}

impl PhaseTiming {
    /// A timing that starts now.
    pub fn start() -> PhaseTiming {
        PhaseTiming {
            started_at: Some(Utc::now()),
            finished_at: None,
        }
    }

    /// Marks the end now.
    pub fn finish(&mut self) {
        self.finished_at = Some(Utc::now());
    }
}

/// Harbor's `StepResult`: one step of a multi-step trial. The step's files are under
/// `<trial>/steps/<step_name>/` (`agent/`, `verifier/`, `artifacts/`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepResult {
    /// The step's `[[steps]] name`.
    pub step_name: String,
    /// What the agent reported for this step's run.
    pub agent_result: Option<AgentContext>,
    /// This step's rewards (its own tests).
    pub verifier_result: Option<VerifierResult>,
    /// The step's first failure (setup.sh, healthcheck, agent, verifier).
    pub exception_info: Option<ExceptionInfo>,
    /// The step's agent run.
    pub agent_execution: Option<PhaseTiming>,
    /// The step's verification.
    pub verifier: Option<PhaseTiming>,
}

impl StepResult {
    /// A step that is about to start.
    pub fn new(step_name: impl Into<String>) -> StepResult {
        StepResult {
            step_name: step_name.into(),
            agent_result: None,
            verifier_result: None,
            exception_info: None,
            agent_execution: None,
            verifier: None,
        }
    }

    /// The step's rewards, when its verifier produced some.
    pub fn rewards(&self) -> Option<&BTreeMap<String, f64>> {
        self.verifier_result.as_ref()?.rewards.as_ref()
    }
}

/// `<trial>/result.json`. `Default` is the empty record a trial's own fields are filled into.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrialResult {
    /// Harbor 0.26's document version (1); absent in older records, which are version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u32>,
    /// Random id.
    pub id: String,
    /// The task's name.
    pub task_name: String,
    /// The trial's name.
    pub trial_name: String,
    /// `file:///abs/trial_dir`.
    pub trial_uri: String,
    /// `LocalTaskId{path}`.
    pub task_id: serde_json::Value,
    /// The dataset name.
    pub source: Option<String>,
    /// The task content digest hex.
    pub task_checksum: String,
    /// The trial config.
    pub config: TrialConfig,
    /// The agent.
    pub agent_info: AgentInfo,
    /// Agent-reported usage.
    pub agent_result: Option<AgentContext>,
    /// Rewards.
    pub verifier_result: Option<VerifierResult>,
    /// Where the trial-level verification ran: `shared` (the agent's container) or `separate`
    /// (its own); null for multi-step trials, as Harbor 0.26 records them.
    #[serde(default)]
    pub verifier_environment_mode: Option<String>,
    /// First exception.
    pub exception_info: Option<ExceptionInfo>,
    /// Trial start.
    pub started_at: Option<DateTime<Utc>>,
    /// Trial end.
    pub finished_at: Option<DateTime<Utc>>,
    /// Container build and start.
    pub environment_setup: Option<PhaseTiming>,
    /// Agent install.
    pub agent_setup: Option<PhaseTiming>,
    /// Agent run.
    pub agent_execution: Option<PhaseTiming>,
    /// Verification.
    pub verifier: Option<PhaseTiming>,
    /// One entry per step a multi-step trial ran, in order (Harbor's `step_results`); `None`
    /// for a single-step task.
    pub step_results: Option<Vec<StepResult>>,
    /// Harbor 0.26's `reward_valid`: rewards were recorded and no recorded exception's policy
    /// voids them (see [`TrialResult::complete_harbor_fields`]); absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_valid: Option<bool>,
    /// Processes the agent left running when verification started (runner-only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_leftover_processes: Vec<LeftoverProcess>,
    /// Whether the verifier ran isolated from them (runner-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier_isolation: Option<VerifierIsolation>,
    /// The programs and startup hooks of the tests that the agent changed (`path: what`;
    /// runner-only): an empty list when the jail found none, absent where no jail checked.
    /// The tests ran with the image's own unless `verifier_isolation.toolchain` is `"agent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier_toolchain_changes: Option<Vec<String>>,
    /// Connection attempts through the egress proxy of a task with a network allowlist, and
    /// how many were refused, by phase (`setup`, `agent`, `verifier`; runner-only). Each
    /// attempt is a line of `agent/network.jsonl` or `verifier/network.jsonl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_attempts: Option<BTreeMap<String, NetworkAttempts>>,
    /// The engine of a pool (`--docker-host`) the trial's environment ran on, by its host
    /// part only (runner-only; absent on a single engine). A retried trial's earlier
    /// attempts keep theirs under `attempts/<n>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Files the runner cut at a cap (runner-only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub truncated_outputs: Vec<TruncatedOutput>,
    /// Runner-only: `scored`, `agent_error` or `infra_error` (see [`TrialOutcome`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TrialOutcome>,
    /// Runner-only: which attempt this record is, from 1; on the final record, how many
    /// attempts the trial took (earlier ones are kept under `attempts/<n>/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Runner-only: pauses of the runner (SIGSTOP, a suspended machine) while the trial ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pauses: Vec<PauseRecord>,
}

/// A pause of the runner process seen while a trial ran: the clock jumped between two ticks
/// of the pause detector.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PauseRecord {
    /// When the runner noticed it was running again.
    pub detected_at: DateTime<Utc>,
    /// How long it was paused, in seconds.
    pub seconds: f64,
}

impl TrialResult {
    /// The trial's main reward (see [`crate::metrics::main_reward`]); `None` when unscored.
    pub fn reward(&self) -> Option<f64> {
        let rewards = self.verifier_result.as_ref()?.rewards.as_ref()?;
        crate::metrics::main_reward(rewards.iter().map(|(name, value)| (name.as_str(), *value)))
    }

    /// The recorded outcome, or (for records without one, e.g. Harbor's) the outcome its
    /// exception and reward imply.
    pub fn outcome(&self) -> TrialOutcome {
        self.outcome.unwrap_or_else(|| {
            TrialOutcome::of(
                self.exception_info.as_ref().map(|e| &e.exception_type),
                self.reward().is_some(),
            )
        })
    }

    /// Fills the fields Harbor 0.26 computes from the others, as it computes them: the
    /// document version, each recorded exception's policy (the trial's and its steps', with
    /// the config's `override_error_policy` entry for its type applied and recorded beside it)
    /// and `reward_valid`.
    pub fn complete_harbor_fields(&mut self) {
        self.schema_version = Some(1);
        let overrides = &self.config.harbor_026.override_error_policy;
        let steps = self.step_results.iter_mut().flatten();
        let exceptions = self
            .exception_info
            .iter_mut()
            .chain(steps.filter_map(|step| step.exception_info.as_mut()));
        let mut voided = false;
        for exception in exceptions {
            let name = exception.exception_type.as_str();
            let policy = crate::error_policy::policy_with(name, overrides);
            voided |= !policy.has_valid_reward;
            exception.policy_override = overrides.get(name).copied();
            exception.policy = Some(policy);
        }
        let rewarded = self
            .verifier_result
            .as_ref()
            .and_then(|v| v.rewards.as_ref())
            .is_some_and(|rewards| !rewards.is_empty());
        self.reward_valid = Some(rewarded && !voided);
    }

    /// How many attempts the trial took (1 for records that do not say).
    pub fn attempt_count(&self) -> u32 {
        self.attempts.unwrap_or(1).max(1)
    }
}
