//! Pure policy: which declared model a request matches (and so which provider serves it), and
//! whether a budget is spent. No I/O here, so every rule is unit-tested directly.

use serde::Serialize;

use crate::config::{Budget, ProviderConfig};
use crate::usage::Endpoint;

/// One declared model, resolved against the configured providers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedModel {
    /// As declared (`openai/gpt-4.1`, `gpt-4.1`, `meta-llama/llama-3-70b`).
    declared: String,
    /// The provider named by the prefix, when the prefix is a configured provider.
    provider: Option<usize>,
    /// The model name an agent sends: the declared name without a provider prefix.
    name: String,
}

/// The models a trial may call.
///
/// A declared `provider/model`, where `provider` is a configured provider, matches requests for
/// `model` or `provider/model` on that provider's API and is served by it. Any other declared
/// name (no prefix, or a prefix that is not a provider, as in OpenRouter-style names) matches a
/// request for exactly that name and is served by the first provider of the request's API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPolicy {
    allowed: Vec<AllowedModel>,
}

/// Where an allowed request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The declared model it matched: what the trial's `models_called` lists.
    pub declared: String,
    /// Index into the bridge's providers.
    pub provider: usize,
    /// The model name the provider knows: a request for `provider/model` goes upstream as
    /// `model` (the provider would not know its own prefix); any other name as requested.
    pub upstream_model: String,
}

/// Why a request's model was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRefusal {
    /// The model is not among the declared ones.
    NotAllowed {
        /// What the agent asked for.
        requested: String,
        /// What the trial declared.
        allowed: Vec<String>,
    },
    /// The model is declared but no provider serves the request's API.
    NoProvider {
        /// What the agent asked for.
        requested: String,
        /// The API of the endpoint it called.
        api: crate::config::ApiKind,
    },
}

impl std::fmt::Display for ModelRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelRefusal::NotAllowed { requested, allowed } => write!(
                f,
                "model '{requested}' is not allowed in this trial; allowed models: {}",
                if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                }
            ),
            ModelRefusal::NoProvider { requested, api } => write!(
                f,
                "model '{requested}' is allowed but the runner has no {api} provider configured to serve it"
            ),
        }
    }
}

impl ModelPolicy {
    /// Resolves declared model names against the providers.
    pub fn new(declared: &[String], providers: &[ProviderConfig]) -> ModelPolicy {
        let allowed = declared
            .iter()
            .map(|declared| {
                let qualified = declared.split_once('/').and_then(|(prefix, name)| {
                    let index = providers.iter().position(|p| p.name == prefix)?;
                    Some((index, name))
                });
                match qualified {
                    Some((index, name)) => AllowedModel {
                        declared: declared.clone(),
                        provider: Some(index),
                        name: name.to_owned(),
                    },
                    None => AllowedModel {
                        declared: declared.clone(),
                        provider: None,
                        name: declared.clone(),
                    },
                }
            })
            .collect();
        ModelPolicy { allowed }
    }

    /// The declared names, in declaration order.
    pub fn declared(&self) -> Vec<String> {
        self.allowed.iter().map(|m| m.declared.clone()).collect()
    }

    /// The model names agents send for the declared models (what `GET /v1/models` lists), with
    /// the provider serving each on `api`, or `None` when the model is declared for another API.
    pub fn listed(
        &self,
        api: crate::config::ApiKind,
        providers: &[ProviderConfig],
    ) -> Vec<(String, String)> {
        self.allowed
            .iter()
            .filter_map(|m| {
                let provider = match m.provider {
                    Some(index) => (providers[index].api == api).then_some(index)?,
                    None => providers.iter().position(|p| p.api == api)?,
                };
                Some((m.name.clone(), providers[provider].name.clone()))
            })
            .collect()
    }

    /// Matches a request for `requested` on `endpoint`.
    pub fn route(
        &self,
        endpoint: Endpoint,
        requested: &str,
        providers: &[ProviderConfig],
    ) -> Result<Route, ModelRefusal> {
        let api = endpoint.api();
        for model in &self.allowed {
            match model.provider {
                // A model declared for a provider of the other API (an Anthropic model on the
                // OpenAI route) does not match here: "not allowed" then lists what is.
                Some(index)
                    if (requested == model.name || requested == model.declared)
                        && providers[index].api == api =>
                {
                    return Ok(Route {
                        declared: model.declared.clone(),
                        provider: index,
                        upstream_model: model.name.clone(),
                    });
                }
                Some(_) => {}
                None if requested == model.name => {
                    return match providers.iter().position(|p| p.api == api) {
                        Some(index) => Ok(Route {
                            declared: model.declared.clone(),
                            provider: index,
                            upstream_model: requested.to_owned(),
                        }),
                        None => Err(ModelRefusal::NoProvider {
                            requested: requested.to_owned(),
                            api,
                        }),
                    };
                }
                None => {}
            }
        }
        Err(ModelRefusal::NotAllowed {
            requested: requested.to_owned(),
            allowed: self.declared(),
        })
    }
}

/// Tokens and dollars spent so far by a trial or a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spend {
    /// Input plus output tokens.
    pub tokens: u64,
    /// Dollars of priced calls.
    pub cost_usd: f64,
}

/// Why `budget` no longer allows calls after `spend`, or `None` while it does. `scope` names
/// whose budget it is ("trial 'x'", "job"). A call is allowed while spending is below every
/// limit; the call that crosses a limit completes (its size is unknown until it ends), and the
/// next one is refused.
pub fn budget_refusal(scope: &str, budget: &Budget, spend: &Spend) -> Option<String> {
    if let Some(max) = budget.max_tokens
        && spend.tokens >= max
    {
        return Some(format!(
            "the {scope} token budget is spent: {} of {max} tokens used",
            spend.tokens
        ));
    }
    if let Some(max) = budget.max_cost_usd
        && spend.cost_usd >= max
    {
        return Some(format!(
            "the {scope} dollar budget is spent: ${:.4} of ${max:.4} used",
            spend.cost_usd
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiKind, KeySource};

    fn providers() -> Vec<ProviderConfig> {
        let provider = |name: &str, api| ProviderConfig {
            name: name.into(),
            api,
            base_url: "http://127.0.0.1:1".into(),
            key: KeySource::Env("UNUSED".into()),
        };
        vec![
            provider("openai", ApiKind::OpenAi),
            provider("anthropic", ApiKind::Anthropic),
            provider("openrouter", ApiKind::OpenAi),
        ]
    }

    fn policy(declared: &[&str]) -> ModelPolicy {
        let declared: Vec<String> = declared.iter().map(|s| s.to_string()).collect();
        ModelPolicy::new(&declared, &providers())
    }

    #[test]
    fn qualified_models_route_to_their_provider() {
        let p = policy(&[
            "openai/gpt-a",
            "anthropic/claude-b",
            "openrouter/meta/llama",
        ]);
        let providers = providers();
        let route = |e, m| p.route(e, m, &providers);
        assert_eq!(
            route(Endpoint::ChatCompletions, "gpt-a").unwrap().provider,
            0
        );
        assert_eq!(
            route(Endpoint::Responses, "openai/gpt-a").unwrap().declared,
            "openai/gpt-a"
        );
        // The provider's own prefix is not sent upstream; a foreign one is part of the name.
        let prefixed = route(Endpoint::Responses, "openai/gpt-a").unwrap();
        assert_eq!(prefixed.upstream_model, "gpt-a");
        assert_eq!(
            route(Endpoint::ChatCompletions, "gpt-a")
                .unwrap()
                .upstream_model,
            "gpt-a"
        );
        assert_eq!(route(Endpoint::Messages, "claude-b").unwrap().provider, 1);
        assert_eq!(
            route(Endpoint::ChatCompletions, "meta/llama")
                .unwrap()
                .provider,
            2
        );
        // The Anthropic model is not served on the OpenAI route, nor the OpenAI one on Messages.
        assert!(route(Endpoint::ChatCompletions, "claude-b").is_err());
        assert!(route(Endpoint::Messages, "gpt-a").is_err());
    }

    #[test]
    fn bare_and_foreign_prefixed_names_match_exactly() {
        let p = policy(&["gpt-bare", "meta-llama/llama-3"]);
        let providers = providers();
        assert_eq!(
            p.route(Endpoint::ChatCompletions, "gpt-bare", &providers)
                .unwrap()
                .provider,
            0
        );
        assert_eq!(
            p.route(Endpoint::Messages, "gpt-bare", &providers)
                .unwrap()
                .provider,
            1
        );
        assert_eq!(
            p.route(Endpoint::ChatCompletions, "meta-llama/llama-3", &providers)
                .unwrap()
                .declared,
            "meta-llama/llama-3"
        );
        assert!(
            p.route(Endpoint::ChatCompletions, "llama-3", &providers)
                .is_err()
        );
    }

    #[test]
    fn refusals_name_the_model_and_the_allowed_list() {
        let p = policy(&["openai/gpt-a", "anthropic/claude-b"]);
        let refusal = p
            .route(Endpoint::ChatCompletions, "gpt-evil", &providers())
            .unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "model 'gpt-evil' is not allowed in this trial; allowed models: openai/gpt-a, anthropic/claude-b"
        );
        let only_openai = vec![providers()[0].clone()];
        let p = ModelPolicy::new(&["bare".to_string()], &only_openai);
        let refusal = p
            .route(Endpoint::Messages, "bare", &only_openai)
            .unwrap_err();
        assert!(
            refusal.to_string().contains("no anthropic provider"),
            "{refusal}"
        );
        assert_eq!(
            policy(&[])
                .route(Endpoint::Messages, "x", &providers())
                .unwrap_err()
                .to_string(),
            "model 'x' is not allowed in this trial; allowed models: none"
        );
    }

    #[test]
    fn models_are_listed_per_api() {
        let p = policy(&["openai/gpt-a", "anthropic/claude-b", "bare"]);
        let providers = providers();
        assert_eq!(
            p.listed(ApiKind::OpenAi, &providers),
            vec![
                ("gpt-a".to_string(), "openai".to_string()),
                ("bare".to_string(), "openai".to_string())
            ]
        );
        assert_eq!(
            p.listed(ApiKind::Anthropic, &providers),
            vec![
                ("claude-b".to_string(), "anthropic".to_string()),
                ("bare".to_string(), "anthropic".to_string())
            ]
        );
    }

    #[test]
    fn budgets_refuse_once_a_limit_is_reached() {
        let budget = Budget {
            max_tokens: Some(100),
            max_cost_usd: Some(0.5),
        };
        assert_eq!(
            budget_refusal(
                "trial",
                &budget,
                &Spend {
                    tokens: 99,
                    cost_usd: 0.49
                }
            ),
            None
        );
        assert_eq!(
            budget_refusal(
                "trial",
                &budget,
                &Spend {
                    tokens: 100,
                    cost_usd: 0.0
                }
            )
            .unwrap(),
            "the trial token budget is spent: 100 of 100 tokens used"
        );
        assert_eq!(
            budget_refusal(
                "job",
                &budget,
                &Spend {
                    tokens: 1,
                    cost_usd: 0.75
                }
            )
            .unwrap(),
            "the job dollar budget is spent: $0.7500 of $0.5000 used"
        );
        assert_eq!(
            budget_refusal(
                "job",
                &Budget::UNLIMITED,
                &Spend {
                    tokens: u64::MAX,
                    cost_usd: 1e9
                }
            ),
            None
        );
    }
}
