//! MCP server `headers` (task schema 1.4, Harbor 0.26): HTTP headers an agent sends to an
//! `sse` or `streamable-http` MCP server. Values may embed `${VAR}` and `${VAR:-default}`
//! templates; a credential header (its name says `KEY`, `SECRET`, `TOKEN`, `PASSWORD`,
//! `CREDENTIAL`, `AUTH`, or it is a cookie) must take its credential from a variable without
//! a default (`Bearer ${TOKEN}`), because `task.toml` is shared and submitted as written.
//!
//! [`check_headers`] is Harbor's `MCPServerConfig.validate_headers`; [`resolve`] is its
//! `resolve_mcp_header_env`: each header's value is resolved into a generated variable
//! (`MCP_AUTH_<hex>_<server>_<header>`), agent configs reference the variable, and only the
//! agent's environment carries the value, so it is in no file the runner writes.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::config::McpServer;

/// Harbor's `_HTTP_HEADER_NAME_PATTERN` (an RFC 9110 token).
static HEADER_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$").expect("header name pattern compiles")
});
/// Harbor's `_EMBEDDED_TEMPLATE_PATTERN`.
static TEMPLATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}").expect("template compiles")
});
/// Harbor's `_TEMPLATED_CREDENTIAL_RE`: an optional auth scheme, then `${VAR}` references
/// without defaults joined only by separators.
static TEMPLATED_CREDENTIAL: LazyLock<Regex> = LazyLock::new(|| {
    let var = r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-)?\}";
    Regex::new(&format!(r"^\s*(?:[A-Za-z]+\s+)?{var}(?:[\s:-]*{var})*\s*$"))
        .expect("credential pattern compiles")
});

/// Why a header is refused or cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The name is not an HTTP token.
    #[error("Invalid MCP HTTP header name: {0:?}")]
    Name(String),
    /// The value (as written or resolved) holds a line break.
    #[error("MCP HTTP header '{0}' must not contain newlines")]
    Newline(String),
    /// A `${` that is not a well-formed template.
    #[error("MCP HTTP header '{0}': Invalid environment variable template")]
    Template(String),
    /// A credential written into the file instead of referenced.
    #[error(
        "MCP HTTP header '{0}' must reference credentials as ${{VAR}} without a default, such as 'Bearer ${{TOKEN}}'"
    )]
    LiteralCredential(String),
    /// A referenced variable has no value and no default.
    #[error(
        "MCP server '{server}' header '{header}': Environment variable '{variable}' is not set (give it to the agent with --agent-env or the agent config's [env])"
    )]
    Unset {
        /// The server's name.
        server: String,
        /// The header's name.
        header: String,
        /// The variable.
        variable: String,
    },
}

/// Harbor's `_SENSITIVE_KEY_RE` (`KEY|SECRET|TOKEN(?!S)|PASSWORD|CREDENTIAL|AUTH`, any case).
pub fn is_sensitive_key(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let token = upper
        .match_indices("TOKEN")
        .any(|(at, _)| upper.as_bytes().get(at + 5) != Some(&b'S'));
    token
        || ["KEY", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"]
            .iter()
            .any(|word| upper.contains(word))
}

/// Harbor's `is_sensitive_header_name`: a sensitive name, or `Cookie`/`Set-Cookie`.
pub fn is_sensitive_header(name: &str) -> bool {
    is_sensitive_key(name) || matches!(name.to_ascii_lowercase().as_str(), "cookie" | "set-cookie")
}

/// Expands the templates of `value` with `lookup` (Harbor's `resolve_embedded_env_vars`).
/// `Err(None)` for a malformed template, `Err(Some(variable))` for an unset one.
fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Option<String>> {
    if TEMPLATE.replace_all(value, " ").contains("${") {
        return Err(None);
    }
    let mut out = String::new();
    let mut last = 0;
    for caps in TEMPLATE.captures_iter(value) {
        let whole = caps.get(0).expect("group 0 exists");
        out.push_str(&value[last..whole.start()]);
        last = whole.end();
        let default = caps.get(2).map(|m| m.as_str());
        if default.is_some_and(|d| d.contains("${")) {
            return Err(None);
        }
        match (lookup(&caps[1]), default) {
            (Some(found), _) => out.push_str(&found),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(Some(caps[1].to_owned())),
        }
    }
    out.push_str(&value[last..]);
    Ok(out)
}

/// Harbor's `has_literal_header_credential`.
fn has_literal_credential(name: &str, value: &str) -> bool {
    let sensitive = is_sensitive_header(name);
    let defaulted = TEMPLATE.captures_iter(value).any(|caps| {
        caps.get(2).is_some_and(|d| !d.as_str().is_empty())
            && (sensitive || is_sensitive_key(&caps[1]))
    });
    defaulted || (sensitive && !value.trim().is_empty() && !TEMPLATED_CREDENTIAL.is_match(value))
}

/// Checks one server's headers as Harbor does.
pub fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), HeaderError> {
    for (name, value) in headers {
        if !HEADER_NAME.is_match(name) {
            return Err(HeaderError::Name(name.clone()));
        }
        if value.contains(['\r', '\n']) {
            return Err(HeaderError::Newline(name.clone()));
        }
        if expand(value, &|_| Some(String::new())).is_err() {
            return Err(HeaderError::Template(name.clone()));
        }
        if has_literal_credential(name, value) {
            return Err(HeaderError::LiteralCredential(name.clone()));
        }
    }
    Ok(())
}

/// The servers' headers resolved for one agent run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeaderEnv {
    /// Server name → header name → the generated variable holding its value.
    pub refs: BTreeMap<String, BTreeMap<String, String>>,
    /// Generated variable → resolved value: the agent's environment only. (Harbor also
    /// scrubs the resolved credentials from the trial's files afterwards; the runner writes
    /// them nowhere, and `runner scrub` is its tool for what an agent printed.)
    pub env: BTreeMap<String, String>,
}

/// Resolves every header of `servers` with `lookup` into generated variables named after
/// `prefix` (Harbor: `MCP_AUTH_<random hex>`, so command logging redacts them as `AUTH`).
pub fn resolve(
    servers: &[McpServer],
    prefix: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<HeaderEnv, HeaderError> {
    let mut resolved = HeaderEnv::default();
    for (i, server) in servers.iter().enumerate() {
        for (j, (name, value)) in server.headers.iter().enumerate() {
            let text = expand(value, lookup).map_err(|unset| match unset {
                Some(variable) => HeaderError::Unset {
                    server: server.name.clone(),
                    header: name.clone(),
                    variable,
                },
                None => HeaderError::Template(name.clone()),
            })?;
            if text.contains(['\r', '\n']) {
                return Err(HeaderError::Newline(name.clone()));
            }
            let variable = format!("{prefix}_{i}_{j}");
            resolved
                .refs
                .entry(server.name.clone())
                .or_default()
                .insert(name.clone(), variable.clone());
            resolved.env.insert(variable, text);
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpTransport;

    fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn credentials_must_come_from_variables_without_defaults() {
        let ok = |pairs: &[(&str, &str)]| check_headers(&headers(pairs));
        assert_eq!(ok(&[("Authorization", "Bearer ${TOKEN}")]), Ok(()));
        assert_eq!(ok(&[("X-Api-Key", "${A}:${B}")]), Ok(()));
        assert_eq!(ok(&[("X-Trace", "literal text")]), Ok(()));
        assert_eq!(ok(&[("X-Tokens", "plain")]), Ok(()), "TOKEN(?!S)");
        assert_eq!(
            ok(&[("Authorization", "Bearer abc123")]),
            Err(HeaderError::LiteralCredential("Authorization".into()))
        );
        assert_eq!(
            ok(&[("Cookie", "session=1")]),
            Err(HeaderError::LiteralCredential("Cookie".into()))
        );
        assert_eq!(
            ok(&[("X-Trace", "${API_KEY:-fallback}")]),
            Err(HeaderError::LiteralCredential("X-Trace".into()))
        );
        assert_eq!(
            ok(&[("Bad Name", "x")]),
            Err(HeaderError::Name("Bad Name".into()))
        );
        assert_eq!(
            ok(&[("X-A", "a\nb")]),
            Err(HeaderError::Newline("X-A".into()))
        );
        assert_eq!(
            ok(&[("X-A", "${1BAD}")]),
            Err(HeaderError::Template("X-A".into()))
        );
    }

    #[test]
    fn values_go_to_generated_variables_and_unset_ones_are_named() {
        let server = McpServer {
            name: "web".into(),
            transport: McpTransport::StreamableHttp,
            url: Some("http://web:8000/mcp".into()),
            command: None,
            args: Vec::new(),
            headers: headers(&[
                ("Authorization", "Bearer ${TOKEN}"),
                ("X-Team", "${TEAM:-red}"),
            ]),
        };
        let env = BTreeMap::from([("TOKEN".to_owned(), "s3cret-value".to_owned())]);
        let lookup = |name: &str| env.get(name).cloned();
        let resolved = resolve(std::slice::from_ref(&server), "MCP_AUTH_AB", &lookup).unwrap();
        assert_eq!(resolved.refs["web"]["Authorization"], "MCP_AUTH_AB_0_0");
        assert_eq!(resolved.env["MCP_AUTH_AB_0_0"], "Bearer s3cret-value");
        assert_eq!(resolved.env["MCP_AUTH_AB_0_1"], "red");
        let missing = resolve(&[server], "P", &|_| None).unwrap_err();
        assert!(matches!(missing, HeaderError::Unset { ref variable, .. } if variable == "TOKEN"));
    }
}
