//! Pure policy over a request body: which top-level fields each API may carry through the
//! bridge, which tools, and how many output tokens the request may produce (what a call
//! reserves of a budget). No I/O here, so every rule is unit-tested directly.
//!
//! Only the `model` field decides where a call goes, so every other field that could change
//! the model (OpenRouter's `models` fallbacks, `provider` routing), reach the network from the
//! provider's side (server tools such as `web_search`, Anthropic's `web_fetch`, `mcp_servers`,
//! code execution containers) or hand the call to something the bridge cannot meter is
//! refused by name. Fields are allow-listed per API: a field the bridge does not know is
//! refused too, rather than forwarded unread, so a new provider feature is opted into here,
//! not discovered in a trial.

use serde_json::Value;

use crate::usage::Endpoint;

/// Fields every call of the API may carry.
const CHAT_FIELDS: &[&str] = &[
    "model",
    "messages",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    // Sampling and reasoning knobs of OpenAI-compatible servers (vLLM, OpenRouter): they
    // change how the declared model answers, never which model or what it can reach.
    "top_k",
    "min_p",
    "repetition_penalty",
    "reasoning",
    "include_reasoning",
];

const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "conversation",
    "include",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

const MESSAGES_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "metadata",
    "stop_sequences",
    "stream",
    "system",
    "temperature",
    "thinking",
    "tool_choice",
    "tools",
    "top_k",
    "top_p",
    "service_tier",
    "context_management",
    "output_format",
    "output_config",
];

/// Fields that let the provider reach the network (or run code) for the agent: forwarded only
/// when the job allows network tools.
const NETWORK_FIELDS: &[(Endpoint, &str)] = &[
    (Endpoint::ChatCompletions, "web_search_options"),
    (Endpoint::Messages, "mcp_servers"),
    (Endpoint::Messages, "container"),
];

/// Tool types the agent itself executes (the provider only describes the call): always
/// allowed. Any other type is a server-side tool the provider runs (web search and fetch, code
/// execution, MCP servers, file search over the account's stores).
fn client_tool(endpoint: Endpoint, kind: Option<&str>) -> bool {
    match endpoint {
        Endpoint::ChatCompletions => matches!(kind, Some("function" | "custom")),
        Endpoint::Responses => matches!(
            kind,
            Some(
                "function"
                    | "custom"
                    | "local_shell"
                    | "shell"
                    | "apply_patch"
                    | "computer_use_preview"
            )
        ),
        // A custom tool has no type (or "custom"); Anthropic's client tools are versioned.
        Endpoint::Messages => match kind {
            None | Some("custom") => true,
            Some(kind) => ["bash_", "text_editor_", "computer_", "memory_"]
                .iter()
                .any(|prefix| kind.starts_with(prefix)),
        },
    }
}

/// Why a request body is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldRefusal {
    /// A top-level field the bridge does not forward for this API.
    UnknownField {
        /// The field.
        field: String,
        /// The endpoint called.
        endpoint: Endpoint,
    },
    /// A field or tool that reaches the network from the provider's side.
    NetworkTool {
        /// The field, or `tools[i].type = …`.
        what: String,
    },
    /// `tools` is not a list of objects.
    BadTools,
}

impl std::fmt::Display for FieldRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldRefusal::UnknownField { field, endpoint } => write!(
                f,
                "the request field \"{field}\" is not forwarded by the runner's LLM bridge on /v1{}; only the fields of the provider's documented API that keep the call on the declared model are (fields such as \"models\" or \"provider\" could route it elsewhere)",
                endpoint.path()
            ),
            FieldRefusal::NetworkTool { what } => write!(
                f,
                "{what} makes the provider reach the network or run code for the agent, which this job does not allow (the job's LLM config sets allow_network_tools = true, or runner run --llm-allow-network-tools, to allow it)"
            ),
            FieldRefusal::BadTools => {
                f.write_str("the request's \"tools\" must be a list of objects")
            }
        }
    }
}

/// Checks a request body's top-level fields and tools for `endpoint`.
pub fn check_request(
    endpoint: Endpoint,
    body: &serde_json::Map<String, Value>,
    allow_network_tools: bool,
) -> Result<(), FieldRefusal> {
    let known = match endpoint {
        Endpoint::ChatCompletions => CHAT_FIELDS,
        Endpoint::Responses => RESPONSES_FIELDS,
        Endpoint::Messages => MESSAGES_FIELDS,
    };
    for field in body.keys() {
        if known.contains(&field.as_str()) {
            continue;
        }
        if NETWORK_FIELDS.contains(&(endpoint, field.as_str())) {
            if allow_network_tools {
                continue;
            }
            return Err(FieldRefusal::NetworkTool {
                what: format!("the request field \"{field}\""),
            });
        }
        return Err(FieldRefusal::UnknownField {
            field: field.clone(),
            endpoint,
        });
    }
    let Some(tools) = body.get("tools") else {
        return Ok(());
    };
    if tools.is_null() {
        return Ok(());
    }
    let tools = tools.as_array().ok_or(FieldRefusal::BadTools)?;
    if allow_network_tools {
        return Ok(());
    }
    check_tools(endpoint, tools, "tools")
}

/// Every tool of `tools` (at `path`) must be one the agent executes. A Responses `namespace`
/// (Codex groups its client-side functions in one) is judged by its member tools.
fn check_tools(endpoint: Endpoint, tools: &[Value], path: &str) -> Result<(), FieldRefusal> {
    for (index, tool) in tools.iter().enumerate() {
        let tool = tool.as_object().ok_or(FieldRefusal::BadTools)?;
        let kind = match tool.get("type") {
            None => None,
            Some(Value::String(kind)) => Some(kind.as_str()),
            Some(_) => return Err(FieldRefusal::BadTools),
        };
        if endpoint == Endpoint::Responses && kind == Some("namespace") {
            let members = tool.get("tools").and_then(Value::as_array);
            let members = members.ok_or(FieldRefusal::BadTools)?;
            check_tools(endpoint, members, &format!("{path}[{index}].tools"))?;
            continue;
        }
        if !client_tool(endpoint, kind) {
            return Err(FieldRefusal::NetworkTool {
                what: format!(
                    "the tool {path}[{index}] of type \"{}\"",
                    kind.unwrap_or("(none)")
                ),
            });
        }
    }
    Ok(())
}

/// Client-side fields the bridge drops before forwarding, by API: Codex's `client_metadata`
/// (its installation, session and turn ids, which OpenAI's own service reads for telemetry)
/// is never an input to the model, and a strict OpenAI-compatible server refuses the unknown
/// field; dropping it also keeps the CLI's installation id off every provider.
const DROPPED_FIELDS: &[(Endpoint, &str)] = &[(Endpoint::Responses, "client_metadata")];

/// Removes [`DROPPED_FIELDS`] from a request body; returns the names removed.
pub fn drop_client_fields(
    endpoint: Endpoint,
    body: &mut serde_json::Map<String, Value>,
) -> Vec<&'static str> {
    DROPPED_FIELDS
        .iter()
        .filter(|(e, _)| *e == endpoint)
        .filter_map(|(_, field)| body.remove(*field).map(|_| *field))
        .collect()
}

/// The most output tokens the request asks for (`max_tokens`, `max_completion_tokens`,
/// `max_output_tokens`), when it says; the smallest when it gives several.
pub fn requested_output_tokens(
    endpoint: Endpoint,
    body: &serde_json::Map<String, Value>,
) -> Option<u64> {
    let fields: &[&str] = match endpoint {
        Endpoint::ChatCompletions => &["max_completion_tokens", "max_tokens"],
        Endpoint::Responses => &["max_output_tokens"],
        Endpoint::Messages => &["max_tokens"],
    };
    fields
        .iter()
        .filter_map(|f| body.get(*f).and_then(Value::as_u64))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(endpoint: Endpoint, body: Value, allow: bool) -> Result<(), FieldRefusal> {
        check_request(endpoint, body.as_object().unwrap(), allow)
    }

    #[test]
    fn routing_fields_are_refused_by_name() {
        let body = json!({"model": "m", "messages": [], "models": ["evil/other"]});
        let refusal = check(Endpoint::ChatCompletions, body, true).unwrap_err();
        assert!(refusal.to_string().contains("\"models\""), "{refusal}");
        let body = json!({"model": "m", "messages": [], "provider": {"order": ["x"]}});
        assert!(check(Endpoint::ChatCompletions, body, false).is_err());
        let ok = json!({"model": "m", "messages": [], "max_tokens": 5, "temperature": 0.1});
        assert_eq!(check(Endpoint::ChatCompletions, ok, false), Ok(()));
    }

    #[test]
    fn server_tools_need_the_job_to_allow_network_tools() {
        let search = json!({"model": "m", "input": "hi", "tools": [{"type": "web_search"}]});
        let refusal = check(Endpoint::Responses, search.clone(), false).unwrap_err();
        assert!(
            refusal.to_string().contains("\"web_search\"")
                && refusal.to_string().contains("allow_network_tools"),
            "{refusal}"
        );
        assert_eq!(check(Endpoint::Responses, search, true), Ok(()));
        let fetch = json!({"model": "m", "messages": [], "max_tokens": 1,
            "tools": [{"name": "f", "input_schema": {}}, {"type": "web_fetch_20250910", "name": "web_fetch"}]});
        let refusal = check(Endpoint::Messages, fetch, false).unwrap_err();
        assert!(refusal.to_string().contains("tools[1]"), "{refusal}");
        let mcp = json!({"model": "m", "messages": [], "max_tokens": 1, "mcp_servers": []});
        assert!(matches!(
            check(Endpoint::Messages, mcp.clone(), false),
            Err(FieldRefusal::NetworkTool { .. })
        ));
        assert_eq!(check(Endpoint::Messages, mcp, true), Ok(()));
        let client = json!({"model": "m", "messages": [], "max_tokens": 1,
            "tools": [{"type": "bash_20250124", "name": "bash"}, {"type": "custom", "name": "c"}]});
        assert_eq!(check(Endpoint::Messages, client, false), Ok(()));
        let functions = json!({"model": "m", "messages": [],
            "tools": [{"type": "function", "function": {"name": "f"}}]});
        assert_eq!(check(Endpoint::ChatCompletions, functions, false), Ok(()));
        let bad = json!({"model": "m", "messages": [], "tools": "web_search"});
        assert_eq!(
            check(Endpoint::ChatCompletions, bad, true),
            Err(FieldRefusal::BadTools)
        );
    }

    #[test]
    fn a_namespace_is_judged_by_its_member_tools() {
        let functions = json!({"model": "m", "tools": [{"type": "namespace", "name": "multi_agent_v1",
            "tools": [{"type": "function", "name": "spawn_agent"}, {"type": "function", "name": "wait"}]}]});
        assert_eq!(check(Endpoint::Responses, functions, false), Ok(()));
        let hidden = json!({"model": "m", "tools": [{"type": "function", "name": "f"}, {"type": "namespace",
            "name": "n", "tools": [{"type": "function", "name": "g"}, {"type": "web_search"}]}]});
        assert_eq!(
            check(Endpoint::Responses, hidden.clone(), false),
            Err(FieldRefusal::NetworkTool {
                what: "the tool tools[1].tools[1] of type \"web_search\"".into()
            })
        );
        assert_eq!(check(Endpoint::Responses, hidden, true), Ok(()));
        let no_members = json!({"model": "m", "tools": [{"type": "namespace", "name": "n"}]});
        assert_eq!(
            check(Endpoint::Responses, no_members, false),
            Err(FieldRefusal::BadTools)
        );
    }

    #[test]
    fn codex_client_metadata_is_dropped_before_the_field_check() {
        let mut body =
            json!({"model": "m", "input": "hi", "client_metadata": {"installation_id": "x"}});
        let body = body.as_object_mut().unwrap();
        assert_eq!(
            drop_client_fields(Endpoint::Responses, body),
            ["client_metadata"]
        );
        assert!(!body.contains_key("client_metadata"));
        assert_eq!(check_request(Endpoint::Responses, body, false), Ok(()));
        let mut chat = json!({"model": "m", "messages": [], "client_metadata": {}});
        let chat = chat.as_object_mut().unwrap();
        assert!(drop_client_fields(Endpoint::ChatCompletions, chat).is_empty());
        assert!(check_request(Endpoint::ChatCompletions, chat, false).is_err());
    }

    #[test]
    fn the_output_cap_is_read_per_api() {
        let body = json!({"max_tokens": 100, "max_completion_tokens": 40});
        let body = body.as_object().unwrap();
        assert_eq!(
            requested_output_tokens(Endpoint::ChatCompletions, body),
            Some(40)
        );
        assert_eq!(requested_output_tokens(Endpoint::Messages, body), Some(100));
        assert_eq!(requested_output_tokens(Endpoint::Responses, body), None);
    }
}
