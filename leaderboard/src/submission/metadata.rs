//! `metadata_formatted_correctly`: Harbor's `metadata.yaml` schema (docs/harbor-format.md §6.1):
//! `agent_url`, `agent_display_name`, `agent_org_display_name`, and `models` with at least one
//! entry of `model_name`, `model_provider`, `model_display_name`, `model_org_display_name`.

use std::path::Path;

use serde_json::Value;

use super::report::Violation;
use super::{Rule, SubmissionError, yaml};

const TOP: [&str; 3] = ["agent_url", "agent_display_name", "agent_org_display_name"];
const MODEL: [&str; 4] = [
    "model_name",
    "model_provider",
    "model_display_name",
    "model_org_display_name",
];

/// How `runner submission prepare` marks a field a person must write: a value starting with
/// it fails this rule until it is replaced.
pub const PLACEHOLDER: &str = "FILL-IN";

/// Largest `metadata.yaml` read: a few hundred bytes in practice.
const MAX_METADATA_BYTES: u64 = 1 << 20;

/// Reads `path` and returns the violations of the metadata rule; an unreadable file (or one
/// larger than 1 MiB) is an error.
pub fn check(path: &Path) -> Result<Vec<Violation>, SubmissionError> {
    let bytes = tasks::bounded::read_capped(path, MAX_METADATA_BYTES, "metadata.yaml")
        .map_err(|e| SubmissionError::io(path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        SubmissionError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        )
    })?;
    let file = path.display().to_string();
    match yaml::parse(&text) {
        Ok(doc) => Ok(check_document(&doc, &file)),
        Err(e) => Ok(vec![Violation {
            rule: Rule::MetadataFormattedCorrectly,
            file: Some(file),
            line: Some(e.line),
            message: format!("cannot read the YAML: {}", e.problem),
            not_recorded: false,
        }]),
    }
}

/// What is wrong with a required text field, if anything: absent, null, empty, or not text
/// (Harbor's pydantic model takes only strings, so `model_name: 4` fails there too).
fn field_problem(value: Option<&Value>) -> Option<String> {
    match value {
        None | Some(Value::Null) => Some("is missing or empty".into()),
        Some(Value::String(s)) if s.trim().is_empty() => Some("is missing or empty".into()),
        Some(Value::String(s)) if s.trim_start().starts_with(PLACEHOLDER) => Some(format!(
            "still holds the {PLACEHOLDER} placeholder `runner submission prepare` wrote; write the real value"
        )),
        Some(Value::String(_)) => None,
        Some(Value::Number(n)) => Some(format!("must be text, got the number {n}; quote it")),
        Some(Value::Bool(b)) => Some(format!("must be text, got the boolean {b}; quote it")),
        Some(Value::Array(_)) => Some("must be text, got a list".into()),
        Some(Value::Object(_)) => Some("must be text, got a mapping".into()),
    }
}

/// The violations of a parsed metadata document shown as `file`, each at the line of the
/// offending node (or of the entry that lacks a field).
pub fn check_document(doc: &yaml::Document, file: &str) -> Vec<Violation> {
    let v = |line: Option<usize>, message: String| Violation {
        rule: Rule::MetadataFormattedCorrectly,
        file: Some(file.to_owned()),
        line,
        message,
        not_recorded: false,
    };
    let value = &doc.value;
    let mut violations = Vec::new();
    if !value.is_object() {
        return vec![v(
            doc.line(""),
            "must be a mapping with agent_url, agent_display_name, agent_org_display_name and models"
                .into(),
        )];
    }
    for key in TOP {
        let pointer = format!("/{key}");
        if let Some(problem) = field_problem(value.get(key)) {
            violations.push(v(doc.line(&pointer), format!("`{key}` {problem}")));
        }
    }
    match value.get("models").and_then(Value::as_array) {
        Some(models) if !models.is_empty() => {
            for (i, model) in models.iter().enumerate() {
                let entry = format!("/models/{i}");
                if !model.is_object() {
                    violations.push(v(
                        doc.line(&entry),
                        format!("`models[{i}]` must be a mapping with {}", MODEL.join(", ")),
                    ));
                    continue;
                }
                for key in MODEL {
                    if let Some(problem) = field_problem(model.get(key)) {
                        let line = doc
                            .line(&format!("{entry}/{key}"))
                            .or_else(|| doc.line(&entry));
                        violations.push(v(line, format!("`models[{i}].{key}` {problem}")));
                    }
                }
            }
        }
        _ => violations.push(v(
            doc.line("/models"),
            format!(
                "`models` must list at least one model with {}",
                MODEL.join(", ")
            ),
        )),
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<(Option<usize>, String)> {
        let doc = yaml::parse(text).unwrap();
        check_document(&doc, "metadata.yaml")
            .into_iter()
            .map(|v| (v.line, v.message))
            .collect()
    }

    const HEAD: &str =
        "agent_url: https://example.com\nagent_display_name: A\nagent_org_display_name: O\n";

    #[test]
    fn a_flow_mapping_model_entry_is_read_like_a_block_one() {
        let text = format!(
            "{HEAD}models:\n  - {{model_name: x, model_provider: y, model_display_name: X, model_org_display_name: Y}}\n"
        );
        assert_eq!(problems(&text), []);
        let text = format!("{HEAD}models: [{{model_name: x, model_provider: y}}]\n");
        assert_eq!(
            problems(&text),
            [
                (
                    Some(4),
                    "`models[0].model_display_name` is missing or empty".to_owned()
                ),
                (
                    Some(4),
                    "`models[0].model_org_display_name` is missing or empty".to_owned()
                )
            ]
        );
    }

    #[test]
    fn each_problem_names_its_field_and_line() {
        let text = "agent_url: ''\nagent_display_name: 7\nmodels:\n  - model_name: m\n    model_provider: true\n  - just-text\n";
        assert_eq!(
            problems(text),
            [
                (Some(1), "`agent_url` is missing or empty".to_owned()),
                (
                    Some(2),
                    "`agent_display_name` must be text, got the number 7; quote it".to_owned()
                ),
                (
                    None,
                    "`agent_org_display_name` is missing or empty".to_owned()
                ),
                (
                    Some(5),
                    "`models[0].model_provider` must be text, got the boolean true; quote it"
                        .to_owned()
                ),
                (
                    Some(4),
                    "`models[0].model_display_name` is missing or empty".to_owned()
                ),
                (
                    Some(4),
                    "`models[0].model_org_display_name` is missing or empty".to_owned()
                ),
                (
                    Some(6),
                    "`models[1]` must be a mapping with model_name, model_provider, model_display_name, model_org_display_name".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_placeholder_left_in_is_named() {
        let text = format!(
            "agent_url: \"{PLACEHOLDER}: the agent's homepage\"\nagent_display_name: A\nagent_org_display_name: O\nmodels:\n  - {{model_name: x, model_provider: y, model_display_name: X, model_org_display_name: '{PLACEHOLDER}'}}\n"
        );
        let got = problems(&text);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, Some(1));
        assert!(
            got[0]
                .1
                .starts_with("`agent_url` still holds the FILL-IN placeholder"),
            "{got:?}"
        );
        assert!(
            got[1]
                .1
                .starts_with("`models[0].model_org_display_name` still holds"),
            "{got:?}"
        );
    }

    #[test]
    fn models_must_be_a_non_empty_list() {
        let text = format!("{HEAD}models: []\n");
        let got = problems(&text);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Some(4));
        assert!(
            got[0]
                .1
                .starts_with("`models` must list at least one model")
        );
        assert_eq!(problems("- a\n")[0].0, Some(1));
    }

    #[test]
    fn unreadable_yaml_is_a_violation_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metadata.yaml");
        std::fs::write(&path, "agent_url: x\nmodels: [\n").unwrap();
        let v = check(&path).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].file.as_deref(),
            Some(path.display().to_string().as_str())
        );
        assert!(v[0].line.is_some());
        assert!(
            v[0].message.starts_with("cannot read the YAML: "),
            "{}",
            v[0].message
        );
    }

    #[test]
    fn a_300_000_deep_metadata_file_is_a_violation_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metadata.yaml");
        std::fs::write(&path, format!("{HEAD}models:\n{}x\n", "- ".repeat(300_000))).unwrap();
        let violations = check(&path).unwrap();
        assert_eq!(violations.len(), 1, "{violations:?}");
        let v = &violations[0];
        assert_eq!(v.rule, Rule::MetadataFormattedCorrectly);
        assert_eq!(v.file.as_deref(), Some(path.display().to_string().as_str()));
        assert_eq!(v.line, Some(5));
        assert!(
            v.message.contains("nested deeper than 128"),
            "{}",
            v.message
        );
    }
}
