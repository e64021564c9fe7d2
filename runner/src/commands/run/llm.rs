//! `runner run`'s model flags: the declared models (`-m`), the LLM bridge's config file, key
//! files and budgets, turned into the job's [`JobBridge`].

use std::path::{Path, PathBuf};

use adapter::Agent;
use engine::job::llm::{budget_stop_sentence, usage_line};
use engine::trial::JobBridge;
use llm_bridge::{Bridge, JobModelBridge, KeySource, LlmConfigFile, ModelKeyError};
use tasks::records::JobLlmUsage;

use crate::exit::CliError;

/// The model and LLM-bridge flags of `runner run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LlmArgs {
    /// A model the agent may call, `provider/model` (repeatable). Recorded as the job's
    /// `agent.model_name` (the first one); with an installed agent its calls go through the
    /// LLM bridge, and a request for any other model is refused.
    #[arg(short = 'm', long = "model", value_name = "PROVIDER/MODEL")]
    pub models: Vec<String>,
    /// The LLM bridge's config (TOML): providers with base_url and key_env or key_file, the
    /// price table (`prices = "file"` or inline), `[budget.trial]` and `[budget.job]`.
    #[arg(long, value_name = "FILE")]
    pub llm_config: Option<PathBuf>,
    /// Read PROVIDER's upstream key from FILE instead of its environment variable
    /// (repeatable).
    #[arg(long, value_name = "PROVIDER=FILE")]
    pub llm_key_file: Vec<String>,
    /// Most tokens (input + output) one trial may use; later calls are refused.
    #[arg(long, value_name = "N")]
    pub trial_max_tokens: Option<u64>,
    /// Most dollars one trial may spend (by the price table).
    #[arg(long, value_name = "USD")]
    pub trial_max_cost: Option<f64>,
    /// Most tokens the whole job may use; once spent no new trial starts.
    #[arg(long, value_name = "N")]
    pub job_max_tokens: Option<u64>,
    /// Most dollars the whole job may spend; once spent no new trial starts.
    #[arg(long, value_name = "USD")]
    pub job_max_cost: Option<f64>,
    /// Let the agent's model calls use the provider's own network tools (web search and
    /// fetch, MCP servers, code execution); the bridge refuses them by default. Same as
    /// `allow_network_tools = true` in --llm-config.
    #[arg(long)]
    pub llm_allow_network_tools: bool,
}

impl LlmArgs {
    /// The first declared model, for the job config's `agent.model_name`.
    pub fn model_name(&self) -> Option<String> {
        self.models.first().cloned()
    }

    /// The models the job declares: `-m`'s, which must each be among the agent config's
    /// `models` when it lists any; else the config's `models`; else its `model_name`.
    /// `config_file` names the agent config in errors.
    pub fn declared_models(
        &self,
        agent: &adapter::AnyAgent,
        config_file: Option<&Path>,
    ) -> Result<Vec<String>, CliError> {
        let listed = agent.declared_models();
        if self.models.is_empty() {
            return Ok(if listed.is_empty() {
                agent.model_name().into_iter().collect()
            } else {
                listed
            });
        }
        if let Some(model) = self
            .models
            .iter()
            .find(|m| !listed.is_empty() && !listed.contains(m))
        {
            let file = config_file.map_or("the agent config".to_owned(), |f| {
                format!("the agent config {}", f.display())
            });
            return Err(CliError::bad_input(format!(
                "-m/--model {model}: {file} lists the models its agent may call (`models` = [{}]) and this is not one of them; give -m with one of those, or add it to `models`",
                listed.join(", ")
            )));
        }
        Ok(self.models.clone())
    }

    /// The job's bridge: `None` for built-in agents and for installed agents that declare no
    /// model list and run without `-m` and `--llm-config`. Every declared model (see
    /// [`LlmArgs::declared_models`]) must have a provider with a key, checked here, before
    /// any trial is planned.
    pub fn job_bridge(
        &self,
        agent: &adapter::AnyAgent,
        config_file: Option<&Path>,
        installed: bool,
        allow_container_secrets: bool,
    ) -> Result<Option<JobBridge>, CliError> {
        if !installed {
            return Ok(None);
        }
        let models = self.declared_models(agent, config_file)?;
        let listed = !agent.declared_models().is_empty();
        if self.models.is_empty() && !listed && self.llm_config.is_none() {
            return Ok(None);
        }
        if models.is_empty() {
            return Err(CliError::bad_input(
                "--llm-config: no model is declared; give -m PROVIDER/MODEL or set model_name or models in the agent config",
            ));
        }
        let mut config = match &self.llm_config {
            Some(path) => LlmConfigFile::load(path).map_err(CliError::bad_input)?,
            None => LlmConfigFile::from_host_env(),
        };
        for pair in &self.llm_key_file {
            let (provider, file) = pair.split_once('=').ok_or_else(|| {
                CliError::bad_input(format!("--llm-key-file {pair:?}: expected PROVIDER=FILE"))
            })?;
            let known = config
                .bridge
                .providers
                .iter_mut()
                .find(|p| p.name == provider);
            let Some(known) = known else {
                return Err(CliError::bad_input(format!(
                    "--llm-key-file: no provider named {provider:?} (configured: {})",
                    provider_names(&config)
                )));
            };
            known.key = KeySource::File(Path::new(file).to_path_buf());
        }
        let budget = |flag: &str, tokens: Option<u64>, cost: Option<f64>| {
            if cost.is_some_and(|c| !c.is_finite() || c < 0.0) {
                return Err(CliError::bad_input(format!(
                    "--{flag}-max-cost: give a number of dollars, 0 or more"
                )));
            }
            Ok((tokens, cost))
        };
        let (tokens, cost) = budget("trial", self.trial_max_tokens, self.trial_max_cost)?;
        config.trial_budget.max_tokens = tokens.or(config.trial_budget.max_tokens);
        config.trial_budget.max_cost_usd = cost.or(config.trial_budget.max_cost_usd);
        let (tokens, cost) = budget("job", self.job_max_tokens, self.job_max_cost)?;
        let job = &mut config.bridge.job_budget;
        job.max_tokens = tokens.or(job.max_tokens);
        job.max_cost_usd = cost.or(job.max_cost_usd);
        if self.llm_allow_network_tools {
            config.bridge.allow_network_tools = true;
        }
        let bridge = Bridge::new(config.bridge)
            .map_err(|e| CliError::bad_input_because("the LLM bridge cannot start", e))?;
        let checked = bridge
            .check_models(&models)
            .and_then(|()| bridge.check_prices(&models, &config.trial_budget, "trial"));
        if let Err(missing) = checked {
            return Err(CliError::bad_input(self.missing_key_message(&missing)));
        }
        Ok(Some(JobBridge {
            bridge: std::sync::Arc::new(JobModelBridge {
                bridge,
                trial_budget: config.trial_budget,
            }),
            models,
            allow_container_secrets,
        }))
    }

    /// What to do about a declared model the runner cannot serve, naming the model, where it
    /// was declared, the provider, the key's variable or file, and the flags that fix it.
    fn missing_key_message(&self, missing: &ModelKeyError) -> String {
        let origin = |model: &str| {
            if self.models.iter().any(|m| m == model) {
                format!("-m/--model {model}")
            } else {
                format!("model {model} (declared by the agent config)")
            }
        };
        match missing {
            ModelKeyError::Unpriced { model, scope } => format!(
                "{}: {missing}; the budget comes from --{scope}-max-cost or [budget.{scope}] max_cost_usd in --llm-config",
                origin(model)
            ),
            ModelKeyError::NoProvider { model } => format!(
                "{}: no provider is configured to serve it; add a [[providers]] entry to --llm-config",
                origin(model)
            ),
            ModelKeyError::MissingKey {
                model,
                provider,
                key,
            } => {
                let fix = match key {
                    KeySource::Env(name) => format!(
                        "{name} is not set in the runner's environment; export {name} (the runner keeps it; it never enters a container)"
                    ),
                    KeySource::File(path) => format!("the key file {} is unusable", path.display()),
                };
                format!(
                    "{}: the runner has no key for provider '{provider}': {fix}, or give --llm-key-file {provider}=FILE, or set key_env/key_file for '{provider}' in --llm-config",
                    origin(model)
                )
            }
        }
    }
}

fn provider_names(config: &LlmConfigFile) -> String {
    config
        .bridge
        .providers
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The summary's lines about the bridge: totals, and why the budget stopped the job.
pub fn summary_lines(usage: &JobLlmUsage) -> Vec<String> {
    let mut lines = vec![usage_line(usage)];
    lines.extend(budget_stop_sentence(usage));
    lines
}
