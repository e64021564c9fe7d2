"""Calls the runner's LLM bridge with the official OpenAI and Anthropic SDKs, streaming and
not, from inside a task container. Configured only by the environment the runner gives agents
(OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY). Prints one JSON
object with what each call returned, for the Rust test to check."""

import json

import anthropic
import openai

GPT = "gpt-scripted"
CLAUDE = "claude-scripted"
HELLO = [{"role": "user", "content": "Say hello."}]

oai = openai.OpenAI()
ant = anthropic.Anthropic()
out = {"versions": {"openai": openai.__version__, "anthropic": anthropic.__version__}}


def usage_of(usage):
    return usage.model_dump() if usage is not None else None


chat = oai.chat.completions.create(model=GPT, messages=HELLO)
out["chat"] = {"text": chat.choices[0].message.content, "usage": usage_of(chat.usage)}

# No stream_options here: the bridge turns usage reporting on by itself.
text, usage = "", None
for chunk in oai.chat.completions.create(model=GPT, messages=HELLO, stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
    if chunk.usage is not None:
        usage = chunk.usage
out["chat_stream"] = {"text": text, "usage": usage_of(usage)}

response = oai.responses.create(model=GPT, input="Say hello.")
out["responses"] = {"text": response.output_text, "usage": usage_of(response.usage)}

text, usage = "", None
for event in oai.responses.create(model=GPT, input="Say hello.", stream=True):
    if event.type == "response.output_text.delta":
        text += event.delta
    elif event.type == "response.completed":
        usage = event.response.usage
out["responses_stream"] = {"text": text, "usage": usage_of(usage)}

message = ant.messages.create(model=CLAUDE, max_tokens=64, messages=HELLO)
out["messages"] = {"text": message.content[0].text, "usage": usage_of(message.usage)}

with ant.messages.stream(model=CLAUDE, max_tokens=64, messages=HELLO) as stream:
    text = "".join(stream.text_stream)
    final = stream.get_final_message()
out["messages_stream"] = {"text": text, "usage": usage_of(final.usage)}

out["models"] = [m.id for m in oai.models.list()]

try:
    oai.chat.completions.create(model="gpt-not-declared", messages=HELLO)
    out["undeclared"] = "answered"
except openai.PermissionDeniedError as error:
    out["undeclared"] = {"status": error.status_code, "message": error.body["message"]}

# The six calls above spent the trial's whole token budget.
try:
    oai.chat.completions.create(model=GPT, messages=HELLO)
    out["over_budget_openai"] = "answered"
except openai.RateLimitError as error:
    out["over_budget_openai"] = {"status": error.status_code, "message": error.body["message"]}
try:
    ant.messages.create(model=CLAUDE, max_tokens=64, messages=HELLO)
    out["over_budget_anthropic"] = "answered"
except anthropic.APIStatusError as error:
    out["over_budget_anthropic"] = {"status": error.status_code, "message": error.message}

print(json.dumps(out))
