//! The `metadata.yaml` `submission prepare` writes: what the jobs say (the agent's name and
//! version, the model with its provider) filled in, what only a person knows marked with
//! [`PLACEHOLDER`], which `validate-submission --metadata` fails until it is replaced.

use leaderboard::submission::SubmittedAgent;
use leaderboard::submission::metadata::PLACEHOLDER;

/// The model's provider and name from `provider/name` (a bare name has no provider).
fn split_model(model: &str) -> (Option<&str>, &str) {
    match model.split_once('/') {
        Some((provider, name)) if !provider.is_empty() && !name.is_empty() => {
            (Some(provider), name)
        }
        _ => (None, model),
    }
}

/// The submission folder's name, `<agent>__<model>` as the TB 2.0 leaderboard names them:
/// the model without its provider, `/` and anything outside `[A-Za-z0-9._-]` as `-`.
pub fn folder_name(agent: &SubmittedAgent) -> String {
    let model = agent
        .model
        .as_deref()
        .map(|m| split_model(m).1)
        .unwrap_or("no-model");
    format!("{}__{}", safe(&agent.name), safe(model))
}

fn safe(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    match cleaned.trim_matches('.') {
        "" => "unnamed".into(),
        name => name.to_owned(),
    }
}

/// A YAML double-quoted scalar (JSON's string syntax is YAML's double-quoted one).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

fn fill_in(what: &str) -> String {
    quoted(&format!("{PLACEHOLDER}: {what}"))
}

/// The `metadata.yaml` text for `agent`.
pub fn render(agent: &SubmittedAgent) -> String {
    let mut out = format!(
        "# metadata.yaml of a Terminal-Bench leaderboard submission, written by `runner submission prepare`.\n\
         # Replace every value that starts with {PLACEHOLDER} before you open the pull request:\n\
         # `runner validate-submission --metadata metadata.yaml` fails while one is left.\n\
         # The other values come from the trials' agent_info; change the display names if you like.\n\
         agent_url: {}\n\
         agent_display_name: {}\n\
         agent_org_display_name: {}\n\
         # From the trials' agent_info (the leaderboard's filter reads them from there too).\n\
         agent_name: {}\n\
         agent_version: {}\n\
         models:\n",
        fill_in("the agent's homepage or repository URL"),
        quoted(&agent.name),
        fill_in("the organisation that made the agent, as the leaderboard shows it"),
        quoted(&agent.name),
        agent
            .version
            .as_deref()
            .map(quoted)
            .unwrap_or_else(|| fill_in("the agent's version (the trials do not record it)")),
    );
    let (provider, name) = match agent.model.as_deref() {
        Some(model) => {
            let (provider, name) = split_model(model);
            (
                provider.map(quoted).unwrap_or_else(|| {
                    fill_in("the model's provider (the trials do not record it)")
                }),
                quoted(name),
            )
        }
        None => (
            fill_in("the model's provider"),
            fill_in("the model (the trials record none)"),
        ),
    };
    out.push_str(&format!(
        "  - model_name: {name}\n    model_provider: {provider}\n    model_display_name: {}\n    model_org_display_name: {}\n",
        fill_in("the model's name as the leaderboard shows it, e.g. Claude Opus 4.6"),
        fill_in("the model's maker as the leaderboard shows it, e.g. Anthropic"),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(model: Option<&str>, version: Option<&str>) -> SubmittedAgent {
        SubmittedAgent {
            name: "terminus-2".into(),
            version: version.map(str::to_owned),
            model: model.map(str::to_owned),
        }
    }

    #[test]
    fn the_folder_is_agent_and_model_without_provider() {
        let a = agent(Some("anthropic/claude-opus-4-6"), None);
        assert_eq!(folder_name(&a), "terminus-2__claude-opus-4-6");
        assert_eq!(
            folder_name(&agent(Some("openrouter/x/y z"), None)),
            "terminus-2__x-y-z"
        );
        assert_eq!(folder_name(&agent(None, None)), "terminus-2__no-model");
        let odd = SubmittedAgent {
            name: "../..".into(),
            version: None,
            model: None,
        };
        assert_eq!(folder_name(&odd), "-__no-model");
    }

    #[test]
    fn the_metadata_fills_what_the_trials_say_and_marks_the_rest() {
        let text = render(&agent(Some("anthropic/claude-opus-4-6"), Some("2.0.0")));
        insta::assert_snapshot!(text);
        let doc = leaderboard::submission::yaml::parse(&text).unwrap();
        let problems = leaderboard::submission::metadata::check_document(&doc, "metadata.yaml");
        let fields: Vec<&str> = problems
            .iter()
            .map(|v| v.message.split('`').nth(1).unwrap())
            .collect();
        assert_eq!(
            fields,
            [
                "agent_url",
                "agent_org_display_name",
                "models[0].model_display_name",
                "models[0].model_org_display_name"
            ]
        );
    }

    #[test]
    fn what_the_trials_do_not_say_is_marked_too() {
        let text = render(&agent(None, None));
        let doc = leaderboard::submission::yaml::parse(&text).unwrap();
        let problems = leaderboard::submission::metadata::check_document(&doc, "metadata.yaml");
        assert_eq!(problems.len(), 6, "{problems:?}");
        assert!(text.contains("agent_version: \"FILL-IN: the agent's version"));
    }
}
