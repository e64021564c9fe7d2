//! Placeholders in a command-style agent's commands, and the `--ak KEY=VALUE` agent kwargs
//! that fill `{kwargs.KEY}`.
//!
//! A placeholder is `{name}` or `{kwargs.KEY}` with a lowercase `name`. Everything else is
//! shell text and passes unchanged: `${VAR}` (a `{` right after `$`), brace expansions such as
//! `{a,b}` or `{1..3}`, JSON. `{{` is a literal `{`. Every value is inserted shell-quoted, so a
//! model name or kwarg with spaces or quotes reaches the program as one word; templates must
//! not quote placeholders themselves.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use tasks::shell_quote;

/// The prefix of kwarg placeholders.
const KWARGS_PREFIX: &str = "kwargs.";

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    /// Shell text, inserted as is.
    Text(&'a str),
    /// A placeholder's name, without braces.
    Placeholder(&'a str),
}

/// Splits `template` into text and placeholders.
fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    let bytes = template.as_bytes();
    while i < bytes.len() {
        if bytes[i] != b'{' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'{') {
            // `{{`: a literal `{`; the second brace is skipped.
            out.push(Piece::Text(&template[text_start..=i]));
            i += 2;
            text_start = i;
            continue;
        }
        let after_dollar = i > 0 && bytes[i - 1] == b'$';
        let name = template[i + 1..]
            .find('}')
            .map(|end| &template[i + 1..i + 1 + end]);
        match name {
            Some(name) if !after_dollar && is_placeholder_name(name) => {
                out.push(Piece::Text(&template[text_start..i]));
                out.push(Piece::Placeholder(name));
                i += name.len() + 2;
                text_start = i;
            }
            _ => i += 1,
        }
    }
    out.push(Piece::Text(&template[text_start..]));
    out.retain(|p| *p != Piece::Text(""));
    out
}

/// `name` or `kwargs.KEY`, where `name` is lowercase letters, digits and `_`.
fn is_placeholder_name(name: &str) -> bool {
    if let Some(key) = name.strip_prefix(KWARGS_PREFIX) {
        return is_kwarg_key(key);
    }
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The placeholders `template` uses, each once.
pub fn placeholders(template: &str) -> BTreeSet<String> {
    pieces(template)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Placeholder(name) => Some(name.to_owned()),
            Piece::Text(_) => None,
        })
        .collect()
}

/// The kwarg `{kwargs.KEY}` names, if `placeholder` is one.
pub fn kwarg_of(placeholder: &str) -> Option<&str> {
    placeholder.strip_prefix(KWARGS_PREFIX)
}

/// Replaces every placeholder with its value from `lookup`, shell-quoted. A placeholder
/// `lookup` does not know is an error naming it (configs are checked at load, so this only
/// happens for values a trial lacks).
pub fn expand(
    template: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, UnknownPlaceholder> {
    expand_with(template, lookup, shell_quote)
}

/// [`expand`] for a value that is not shell (a package requirement): values go in as they are.
pub fn expand_plain(
    template: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, UnknownPlaceholder> {
    expand_with(template, lookup, str::to_owned)
}

fn expand_with(
    template: &str,
    lookup: impl Fn(&str) -> Option<String>,
    quote: impl Fn(&str) -> String,
) -> Result<String, UnknownPlaceholder> {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Placeholder(name) => {
                let value = lookup(name).ok_or_else(|| UnknownPlaceholder(name.to_owned()))?;
                out.push_str(&quote(&value));
            }
        }
    }
    Ok(out)
}

/// A placeholder without a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{{{0}}}` has no value")]
pub struct UnknownPlaceholder(pub String);

/// A kwarg key: a letter or `_`, then letters, digits and `_` (a Python keyword-argument
/// name, as Harbor's agents take them).
pub fn is_kwarg_key(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses repeated `--ak KEY=VALUE` flags as Harbor does: a value that is JSON (`3`, `true`,
/// `[1,2]`, `"x"`) is kept as that JSON value, anything else as a string. Errors name the
/// flag and the key, never the value (it may be a secret).
pub fn parse_kwargs(pairs: &[String]) -> Result<Map<String, Value>, KwargError> {
    let mut kwargs = Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            let start = pair.chars().take(40).collect::<String>();
            return Err(KwargError::NoEquals { start });
        };
        if !is_kwarg_key(key) {
            return Err(KwargError::BadKey {
                key: key.to_owned(),
            });
        }
        let value = serde_json::from_str::<Value>(value)
            .unwrap_or_else(|_| Value::String(value.to_owned()));
        kwargs.insert(key.to_owned(), value);
    }
    Ok(kwargs)
}

/// A `--ak` flag that is not `KEY=VALUE` with a keyword-argument key. Neither variant holds
/// the value: it may be a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KwargError {
    /// No `=`: the flag's first 40 characters are quoted (a value alone would be cut short).
    #[error("--ak/--agent-kwarg {start:?}: expected KEY=VALUE (e.g. --ak cost_limit=3)")]
    NoEquals {
        /// The flag's first 40 characters.
        start: String,
    },
    /// A key that is not a Python keyword-argument name.
    #[error(
        "--ak/--agent-kwarg {key:?}: a key must start with a letter or '_' and use only letters, digits and '_'"
    )]
    BadKey {
        /// The key as given.
        key: String,
    },
}

/// A kwarg as template text: a string as it is, any other JSON value as JSON.
pub fn kwarg_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "model" => Some("openai/gpt-4.1".into()),
            "instruction_file" => Some("/tmp/it's here.md".into()),
            "kwargs.cost_limit" => Some("3".into()),
            _ => None,
        }
    }

    #[test]
    fn placeholders_are_replaced_shell_quoted_and_shell_syntax_is_left_alone() {
        let template = "mini --model={model} --task=\"$(cat {instruction_file})\" -l {kwargs.cost_limit} \
                        ${HOME} {a,b} {1..3} '{\"k\": 1}' {{model}";
        let out = expand(template, lookup).unwrap();
        assert_eq!(
            out,
            "mini --model='openai/gpt-4.1' --task=\"$(cat '/tmp/it'\\''s here.md')\" -l '3' \
             ${HOME} {a,b} {1..3} '{\"k\": 1}' {model}"
        );
        let out = std::process::Command::new("bash")
            .args([
                "-c",
                &expand("printf %s {instruction_file}", lookup).unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "/tmp/it's here.md");
    }

    #[test]
    fn placeholders_lists_each_name_once_and_unknown_ones_fail_by_name() {
        let names = placeholders("{model} {model} {kwargs.x} ${y} {Z} {workdir}");
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["kwargs.x", "model", "workdir"]
        );
        assert_eq!(kwarg_of("kwargs.x"), Some("x"));
        assert_eq!(kwarg_of("model"), None);
        let err = expand("run {nope}", lookup).unwrap_err();
        assert_eq!(err.to_string(), "`{nope}` has no value");
        assert_eq!(
            expand("no braces at all", lookup).unwrap(),
            "no braces at all"
        );
        assert_eq!(expand("{unclosed", lookup).unwrap(), "{unclosed");
    }

    #[test]
    fn kwargs_parse_as_json_or_text_and_bad_keys_name_the_flag() {
        let kwargs = parse_kwargs(&[
            "cost_limit=3".into(),
            "effort=high".into(),
            "flag=true".into(),
            "expr=a=b".into(),
            "quoted=\"7\"".into(),
        ])
        .unwrap();
        assert_eq!(kwargs["cost_limit"], Value::from(3));
        assert_eq!(kwargs["effort"], Value::from("high"));
        assert_eq!(kwargs["flag"], Value::from(true));
        assert_eq!(kwargs["expr"], Value::from("a=b"));
        assert_eq!(kwargs["quoted"], Value::from("7"));
        assert_eq!(kwarg_text(&kwargs["cost_limit"]), "3");
        assert_eq!(kwarg_text(&kwargs["effort"]), "high");
        for bad in ["no-equals", "1abc=x", "bad-key=x", "=x", "a.b=x"] {
            let err = parse_kwargs(&[bad.into()]).unwrap_err().to_string();
            assert!(err.starts_with("--ak/--agent-kwarg"), "{bad}: {err}");
        }
        let err = parse_kwargs(&["=hunter2secret".into()]).unwrap_err();
        assert!(!err.to_string().contains("hunter2secret"), "{err}");
    }

    #[test]
    fn a_plain_expansion_leaves_values_unquoted() {
        let lookup = |name: &str| (name == "kwargs.v").then(|| "0.2.190".to_owned());
        assert_eq!(
            expand_plain("sdk=={kwargs.v}", lookup).unwrap(),
            "sdk==0.2.190"
        );
        assert_eq!(expand("sdk=={kwargs.v}", lookup).unwrap(), "sdk=='0.2.190'");
    }
}
