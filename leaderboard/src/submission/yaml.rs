//! A minimal reader for `metadata.yaml`: block mappings, block sequences of mappings or
//! scalars, plain and quoted scalars, and comments. Enough for Harbor's metadata schema; flow
//! collections (`[a, b]`, `{k: v}`), anchors and multi-line scalars are reported as
//! unsupported rather than misread. A small reader avoids a YAML dependency for one file.

use serde_json::{Map, Value};

/// A YAML document this reader cannot read, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct YamlError {
    /// Where.
    pub line: usize,
    /// What.
    pub problem: String,
}

struct Line {
    number: usize,
    indent: usize,
    text: String,
}

/// Parses `text` into a JSON value (scalars become strings, `null`/`~`/empty become null).
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let stripped = strip_comment(raw);
        if stripped.trim().is_empty() || stripped.trim() == "---" {
            continue;
        }
        if raw.starts_with('\t') {
            return Err(YamlError {
                line: i + 1,
                problem: "tabs are not allowed for indentation".into(),
            });
        }
        let indent = stripped.len() - stripped.trim_start().len();
        lines.push(Line {
            number: i + 1,
            indent,
            text: stripped.trim().to_owned(),
        });
    }
    if lines.is_empty() {
        return Ok(Value::Null);
    }
    let mut pos = 0;
    let indent = lines[0].indent;
    let value = block(&mut lines, &mut pos, indent)?;
    if let Some(line) = lines.get(pos) {
        return Err(YamlError {
            line: line.number,
            problem: "unexpected indentation".into(),
        });
    }
    Ok(value)
}

/// Removes a ` #` comment that is not inside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'\'' | b'"') => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b'#') if i == 0 || bytes[i - 1] == b' ' => return &line[..i],
            _ => {}
        }
    }
    line
}

fn block(lines: &mut [Line], pos: &mut usize, indent: usize) -> Result<Value, YamlError> {
    if lines[*pos].text.starts_with("- ") || lines[*pos].text == "-" {
        sequence(lines, pos, indent)
    } else {
        mapping(lines, pos, indent)
    }
}

fn sequence(lines: &mut [Line], pos: &mut usize, indent: usize) -> Result<Value, YamlError> {
    let mut items = Vec::new();
    while *pos < lines.len() && lines[*pos].indent == indent && lines[*pos].text.starts_with('-') {
        let rest = lines[*pos].text[1..].trim_start().to_owned();
        if rest.is_empty() {
            *pos += 1;
            items.push(nested(lines, pos, indent)?);
        } else if is_key_line(&rest) {
            // `- key: value` opens a mapping whose keys sit where `key` starts.
            let offset = lines[*pos].text.len() - rest.len();
            lines[*pos].indent = indent + offset;
            lines[*pos].text = rest;
            let inner = lines[*pos].indent;
            items.push(mapping(lines, pos, inner)?);
        } else {
            items.push(scalar(&rest, lines[*pos].number)?);
            *pos += 1;
        }
    }
    Ok(Value::Array(items))
}

fn is_key_line(text: &str) -> bool {
    !text.starts_with(['"', '\'']) && (text.contains(": ") || text.ends_with(':'))
}

fn mapping(lines: &mut [Line], pos: &mut usize, indent: usize) -> Result<Value, YamlError> {
    let mut map = Map::new();
    while *pos < lines.len() && lines[*pos].indent == indent {
        let line = &lines[*pos];
        if line.text.starts_with('-') {
            break;
        }
        let number = line.number;
        let (key, rest) = match line.text.split_once(": ") {
            Some((k, v)) => (k.trim(), v.trim()),
            None if line.text.ends_with(':') => (line.text[..line.text.len() - 1].trim(), ""),
            None => {
                return Err(YamlError {
                    line: number,
                    problem: format!("expected `key: value`, got `{}`", line.text),
                });
            }
        };
        let key = unquote(key).to_owned();
        let rest = rest.to_owned();
        *pos += 1;
        let value = if rest.is_empty() {
            nested(lines, pos, indent)?
        } else {
            scalar(&rest, number)?
        };
        if map.insert(key.clone(), value).is_some() {
            return Err(YamlError {
                line: number,
                problem: format!("duplicate key `{key}`"),
            });
        }
    }
    Ok(Value::Object(map))
}

/// The value under a `key:` with nothing after the colon: a deeper block, a sequence at the
/// same indent (`key:\n- item`), or null.
fn nested(lines: &mut [Line], pos: &mut usize, indent: usize) -> Result<Value, YamlError> {
    match lines.get(*pos) {
        Some(next) if next.indent > indent => {
            let inner = next.indent;
            block(lines, pos, inner)
        }
        Some(next) if next.indent == indent && next.text.starts_with('-') => {
            sequence(lines, pos, indent)
        }
        _ => Ok(Value::Null),
    }
}

fn unquote(text: &str) -> &str {
    for q in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(q) && text.ends_with(q) {
            return &text[1..text.len() - 1];
        }
    }
    text
}

fn scalar(text: &str, line: usize) -> Result<Value, YamlError> {
    if text.starts_with(['[', '{', '&', '*', '|', '>']) {
        return Err(YamlError {
            line,
            problem: format!(
                "`{text}`: flow collections, anchors and block scalars are not supported; use plain `key: value` lines"
            ),
        });
    }
    Ok(match text {
        "null" | "~" | "Null" | "NULL" => Value::Null,
        _ => Value::String(unquote(text).to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::parse;

    #[test]
    fn reads_harbor_metadata_shapes() {
        let text = "# comment\nagent_url: https://example.com/agent#readme\nagent_display_name: \"My Agent\"\nmodels:\n  - model_name: gpt-5\n    model_provider: openai # trailing\n  - model_name: 'o3'\nempty:\nlist:\n- a\n- b\n";
        let value = parse(text).unwrap();
        assert_eq!(
            value,
            json!({
                "agent_url": "https://example.com/agent#readme",
                "agent_display_name": "My Agent",
                "models": [{"model_name": "gpt-5", "model_provider": "openai"}, {"model_name": "o3"}],
                "empty": null,
                "list": ["a", "b"]
            })
        );
    }

    #[test]
    fn reports_what_it_cannot_read() {
        assert_eq!(parse("models: [a, b]\n").unwrap_err().line, 1);
        assert!(
            parse("a: 1\njust text\n")
                .unwrap_err()
                .problem
                .contains("key: value")
        );
        assert!(
            parse("a: 1\na: 2\n")
                .unwrap_err()
                .problem
                .contains("duplicate")
        );
    }
}
