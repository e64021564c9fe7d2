//! What the scripted upstream answers: canned replies chosen by the request's text and the
//! conversation's turn, or served in arrival order.

use std::sync::Mutex;

use serde_json::Value;

/// Tokens one reply reports, in Harbor's meaning: `input` counts every input token, cache
/// reads (`cached`) and cache writes (`cache_write`, Anthropic only) included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub cached: u64,
    pub cache_write: u64,
    pub output: u64,
}

impl Usage {
    /// Input plus output: what a token budget counts.
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

/// A tool call a reply makes: an OpenAI `tool_calls` entry (a `function_call` item on
/// `/v1/responses`) or an Anthropic `tool_use` block, with the same name and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The tool's name, e.g. `bash`.
    pub name: String,
    /// Its arguments (a JSON object): sent as a JSON string to OpenAI clients, as `input` to
    /// Anthropic ones.
    pub arguments: Value,
}

/// One canned answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The completion text (may be empty when the reply makes tool calls).
    pub text: String,
    /// Tool calls after the text; with any, the answer's finish reason is the provider's "tool
    /// calls" one (`tool_calls`, `tool_use`).
    pub tool_calls: Vec<ToolCall>,
    /// The usage reported with it; `None` means the endpoint's default
    /// ([`super::CHAT_USAGE`], [`super::RESPONSES_USAGE`], [`super::MESSAGES_USAGE`]).
    pub usage: Option<Usage>,
    /// Answer with this HTTP status and a provider-shaped error instead.
    pub fail: Option<u16>,
}

impl Reply {
    /// A reply with `text` and the endpoint's default usage.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: text.into(),
            tool_calls: Vec::new(),
            usage: None,
            fail: None,
        }
    }

    /// A reply with `text` and one call of tool `name` with `arguments` (a JSON object).
    pub fn tool_call(text: impl Into<String>, name: impl Into<String>, arguments: Value) -> Reply {
        Reply {
            tool_calls: vec![ToolCall {
                name: name.into(),
                arguments,
            }],
            ..Reply::text(text)
        }
    }

    /// This reply reporting `usage` instead of the endpoint's default.
    pub fn reporting(self, usage: Usage) -> Reply {
        Reply {
            usage: Some(usage),
            ..self
        }
    }

    /// A reply with `text` reporting `usage`.
    pub fn with_usage(text: impl Into<String>, usage: Usage) -> Reply {
        Reply::text(text).reporting(usage)
    }

    /// A provider-shaped error with `status` (e.g. 500, 429).
    pub fn fail(status: u16) -> Reply {
        Reply {
            fail: Some(status),
            ..Reply::text("scripted failure")
        }
    }
}

/// A conversation the script recognises by a fragment of its text.
#[derive(Debug, Clone)]
struct Conversation {
    when_contains: String,
    replies: Vec<Reply>,
}

/// The upstream's script. With none of it set, every call answers [`super::REPLY`].
///
/// - [`Script::when`]: a request any of whose message text contains the fragment (e.g. a task's
///   instruction) is answered from that conversation's replies, the reply chosen by the turn:
///   the number of assistant messages already in the request (0 for the first call, 1 after
///   one answer, …). Stateless, so concurrent trials each follow their own conversation. Past
///   the end, the last reply repeats. The first matching conversation wins.
/// - [`Script::then`]: otherwise, replies served in arrival order over the whole upstream; past
///   the end, the last one repeats.
#[derive(Debug, Default)]
pub struct Script {
    conversations: Vec<Conversation>,
    in_order: Vec<Reply>,
    served: Mutex<usize>,
}

impl Script {
    /// An empty script: every call gets [`super::REPLY`] with the endpoint's default usage.
    pub fn new() -> Script {
        Script::default()
    }

    /// Adds a conversation recognised by `fragment` (see the type's doc).
    pub fn when(mut self, fragment: impl Into<String>, replies: Vec<Reply>) -> Script {
        self.conversations.push(Conversation {
            when_contains: fragment.into(),
            replies,
        });
        self
    }

    /// Appends a reply to the arrival-order list (see the type's doc).
    pub fn then(mut self, reply: Reply) -> Script {
        self.in_order.push(reply);
        self
    }

    /// The reply for a request body.
    pub(super) fn reply_for(&self, body: &Value) -> Reply {
        let texts = message_texts(body);
        for conversation in &self.conversations {
            if texts
                .iter()
                .any(|t| t.contains(&conversation.when_contains))
            {
                let turn = assistant_turns(body);
                return pick(&conversation.replies, turn);
            }
        }
        if self.in_order.is_empty() {
            return Reply::text(super::REPLY);
        }
        let mut served = self.served.lock().expect("script lock");
        let reply = pick(&self.in_order, *served);
        *served += 1;
        reply
    }
}

fn pick(replies: &[Reply], index: usize) -> Reply {
    replies
        .get(index)
        .or(replies.last())
        .cloned()
        .unwrap_or_else(|| Reply::text(super::REPLY))
}

/// The request's messages (chat, Anthropic) or input items (responses).
fn items(body: &Value) -> Vec<&Value> {
    match body.get("messages").or_else(|| body.get("input")) {
        Some(Value::Array(items)) => items.iter().collect(),
        _ => Vec::new(),
    }
}

/// Assistant messages already in the conversation: the turn being asked for.
fn assistant_turns(body: &Value) -> usize {
    items(body)
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// Every text of the request: system prompt, each message's content (string or parts).
pub(super) fn message_texts(body: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    if let Some(Value::String(input)) = body.get("input") {
        texts.push(input.clone());
    }
    for key in ["system", "instructions"] {
        if let Some(value) = body.get(key) {
            texts.push(flatten(value));
        }
    }
    for item in items(body) {
        texts.push(flatten(&item["content"]));
    }
    texts
}

fn flatten(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p {
                Value::String(text) => text.clone(),
                _ => p["text"].as_str().unwrap_or_default().to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The last message's text: where the control words are looked for.
pub(super) fn last_text(body: &Value) -> String {
    match body.get("messages").or_else(|| body.get("input")) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => items
            .last()
            .map(|m| flatten(&m["content"]))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(messages: Value) -> Value {
        json!({"model": "m", "messages": messages})
    }

    #[test]
    fn conversations_follow_the_turn_and_repeat_the_last_reply() {
        let script = Script::new().when(
            "fix the bug",
            vec![Reply::text("first"), Reply::text("second")],
        );
        let turn0 = chat(json!([{"role": "user", "content": "please fix the bug"}]));
        let turn1 = chat(json!([
            {"role": "user", "content": [{"type": "text", "text": "please fix the bug"}]},
            {"role": "assistant", "content": "first"},
            {"role": "user", "content": "output"},
        ]));
        let mut turn2 = turn1.clone();
        turn2["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "assistant", "content": "second"}));
        assert_eq!(script.reply_for(&turn0).text, "first");
        assert_eq!(script.reply_for(&turn1).text, "second");
        assert_eq!(script.reply_for(&turn2).text, "second");
        let other = chat(json!([{"role": "user", "content": "hello"}]));
        assert_eq!(script.reply_for(&other).text, super::super::REPLY);
    }

    #[test]
    fn in_order_replies_are_served_by_arrival() {
        let script = Script::new().then(Reply::fail(500)).then(Reply::text("ok"));
        let body = chat(json!([{"role": "user", "content": "x"}]));
        assert_eq!(script.reply_for(&body).fail, Some(500));
        assert_eq!(script.reply_for(&body).text, "ok");
        assert_eq!(script.reply_for(&body).text, "ok");
    }

    #[test]
    fn system_prompts_count_as_text() {
        let script = Script::new().when("SYSTEM-MARK", vec![Reply::text("hit")]);
        let body = json!({"model": "m", "system": "SYSTEM-MARK", "messages": []});
        assert_eq!(script.reply_for(&body).text, "hit");
    }
}
