//! Reads `metadata.yaml` with a maintained YAML 1.2 parser into a JSON value, remembering the
//! line of every node so the metadata rule can say where a field is wrong.
//!
//! Why `saphyr`: it is the maintained successor of yaml-rust/yaml-rust2 (same maintainers,
//! releases through 2026), pure Rust with no unsafe C port, YAML 1.2 complete (flow
//! collections, anchors, block scalars), and its `MarkedYaml` carries a span per node, which a
//! serde deserializer would throw away. The alternatives: `serde_yaml` is deprecated,
//! `serde_yml` is now a deprecated shim, and `serde_norway` (a serde_yaml fork over a
//! C-to-Rust libyaml translation) has had no release since 2024. saphyr also refuses duplicate
//! keys and bounds alias expansion (billion laughs) by default.

use std::collections::HashMap;

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, ScanError, YamlData};
use serde_json::{Map, Number, Value};

/// A YAML document this reader cannot read, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct YamlError {
    /// Where.
    pub line: usize,
    /// What.
    pub problem: String,
}

impl From<ScanError> for YamlError {
    fn from(e: ScanError) -> YamlError {
        YamlError {
            line: e.marker().line(),
            problem: e.info().to_owned(),
        }
    }
}

/// A parsed document: its value, and the 1-based line where each node starts, by JSON
/// pointer (`/models/0/model_name`; the root is `""`).
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The document as JSON (YAML 1.2 core schema: `3` is a number, `"3"` and `x` strings).
    pub value: Value,
    lines: HashMap<String, usize>,
}

impl Document {
    /// The line where the node at `pointer` starts, if the node exists.
    pub fn line(&self, pointer: &str) -> Option<usize> {
        self.lines.get(pointer).copied()
    }
}

/// Parses `text`. An empty document is `null`; several documents are an error, since a
/// metadata file holds one.
pub fn parse(text: &str) -> Result<Document, YamlError> {
    // Before a tree is built: building, converting and dropping one recurse per level.
    tasks::nesting::check_yaml(text).map_err(|e| YamlError {
        line: e.line,
        problem: e.problem(),
    })?;
    let mut docs = MarkedYaml::load_from_str(text).map_err(|e| tab_hint(text, e))?;
    let mut lines = HashMap::new();
    let value = match docs.len() {
        0 => Value::Null,
        1 => convert(&docs.remove(0), String::new(), &mut lines)?,
        _ => {
            return Err(YamlError {
                line: docs[1].span.start.line(),
                problem: "a second YAML document (`---`); the file must hold one document".into(),
            });
        }
    };
    Ok(Document { value, lines })
}

/// saphyr reports a tab in indentation at the start of the scalar it was reading, often the
/// line before; name the line with the tab instead, which is what the user must fix.
fn tab_hint(text: &str, error: ScanError) -> YamlError {
    let mut error = YamlError::from(error);
    if error.problem.contains("tab") {
        let indented_with_tab = text.lines().position(|line| {
            let indent = &line[..line.len() - line.trim_start().len()];
            indent.contains('\t')
        });
        if let Some(i) = indented_with_tab {
            error = YamlError {
                line: i + 1,
                problem: "a tab in the indentation; YAML indents with spaces".into(),
            };
        }
    }
    error
}

/// Escapes a mapping key for a JSON pointer (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn convert(
    node: &MarkedYaml<'_>,
    pointer: String,
    lines: &mut HashMap<String, usize>,
) -> Result<Value, YamlError> {
    let line = node.span.start.line();
    lines.insert(pointer.clone(), line);
    let value = match &node.data {
        YamlData::Value(scalar) => scalar_value(scalar),
        // Early parsing is on, so a raw representation is still a string.
        YamlData::Representation(text, _, _) => Value::String(text.to_string()),
        YamlData::Tagged(_, inner) => return convert(inner, pointer, lines),
        YamlData::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(convert(item, format!("{pointer}/{i}"), lines)?);
            }
            Value::Array(out)
        }
        YamlData::Mapping(entries) => {
            let mut out = Map::new();
            for (key, item) in entries {
                let key = key_text(key)?;
                let child = format!("{pointer}/{}", pointer_token(&key));
                let item = convert(item, child, lines)?;
                out.insert(key, item);
            }
            Value::Object(out)
        }
        YamlData::BadValue => {
            return Err(YamlError {
                line,
                problem: "a value that does not match its tag (e.g. `!!int x`)".into(),
            });
        }
        // The loader resolves aliases; an unresolved one means an anchor that was never defined.
        YamlData::Alias(_) => {
            return Err(YamlError {
                line,
                problem: "an alias (`*name`) to an undefined anchor".into(),
            });
        }
    };
    Ok(value)
}

fn scalar_value(scalar: &Scalar<'_>) -> Value {
    match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        Scalar::FloatingPoint(f) => Number::from_f64(f.into_inner())
            .map(Value::Number)
            // `.nan` and `.inf` have no JSON number; keep their YAML spelling.
            .unwrap_or_else(|| Value::String(f.into_inner().to_string())),
        Scalar::String(s) => Value::String(s.to_string()),
    }
}

fn key_text(key: &MarkedYaml<'_>) -> Result<String, YamlError> {
    match &key.data {
        YamlData::Value(Scalar::String(s)) => Ok(s.to_string()),
        YamlData::Value(Scalar::Null) => Ok("null".into()),
        YamlData::Value(scalar) => Ok(match scalar_value(scalar) {
            Value::String(s) => s,
            other => other.to_string(),
        }),
        YamlData::Tagged(_, inner) => key_text(inner),
        _ => Err(YamlError {
            line: key.span.start.line(),
            problem: "a mapping key that is a list or mapping; keys must be plain text".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Document, parse};

    /// Parses `text`, asserting the value it reads.
    fn parses_to(text: &str, expected: serde_json::Value) -> Document {
        let doc = parse(text).unwrap();
        assert_eq!(doc.value, expected);
        doc
    }

    #[test]
    fn reads_harbor_metadata_shapes_with_lines() {
        let doc = parses_to(
            "# comment\nagent_url: https://example.com/agent#readme\nagent_display_name: \"My Agent\"\nmodels:\n  - model_name: gpt-5\n    model_provider: openai # trailing\n  - model_name: 'o3'\nempty:\nlist:\n- a\n- b\n",
            json!({
                "agent_url": "https://example.com/agent#readme",
                "agent_display_name": "My Agent",
                "models": [{"model_name": "gpt-5", "model_provider": "openai"}, {"model_name": "o3"}],
                "empty": null,
                "list": ["a", "b"]
            }),
        );
        assert_eq!(doc.line("/agent_url"), Some(2));
        assert_eq!(doc.line("/models/0"), Some(5));
        assert_eq!(doc.line("/models/1/model_name"), Some(7));
        assert_eq!(doc.line("/list/1"), Some(11));
        assert_eq!(doc.line("/missing"), None);
    }

    #[test]
    fn reads_flow_collections_block_scalars_and_anchors() {
        let doc = parses_to(
            "models:\n  - {model_name: x, model_provider: y}\n  - &m {model_name: z}\n  - *m\ntags: [a, 'b c']\nnotes: |\n  two\n  lines\n",
            json!({
                "models": [
                    {"model_name": "x", "model_provider": "y"},
                    {"model_name": "z"},
                    {"model_name": "z"}
                ],
                "tags": ["a", "b c"],
                "notes": "two\nlines\n"
            }),
        );
        assert_eq!(doc.line("/models/0/model_provider"), Some(2));
    }

    #[test]
    fn keeps_yaml_1_2_scalar_types() {
        parses_to(
            "a: 3\nb: '3'\nc: true\nd: 1.5\ne: ~\nf: no\n",
            json!({"a": 3, "b": "3", "c": true, "d": 1.5, "e": null, "f": "no"}),
        );
    }

    #[test]
    fn reports_what_it_cannot_read_with_its_line() {
        let err = parse("a: 1\nb: [unclosed\n").unwrap_err();
        assert!(err.line >= 2, "{err}");
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(err.problem.contains("duplicate"), "{err}");
        let err = parse("a: 1\n\tb: 2\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(err.problem.contains("second YAML document"), "{err}");
        let err = parse("? [a, b]\n: c\n").unwrap_err();
        assert!(err.problem.contains("keys must be plain text"), "{err}");
        assert_eq!(parse("").unwrap().value, json!(null));
        assert_eq!(parse("# only a comment\n").unwrap().value, json!(null));
    }

    #[test]
    fn refuses_an_alias_bomb() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(parse(&text).is_err(), "10^8 nodes must not be expanded");
    }
}
