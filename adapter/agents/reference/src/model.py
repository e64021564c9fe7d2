"""Model-driven mode of the reference agent: it asks a model for the commands to run.

The model is reached through the OpenAI chat-completions API at $OPENAI_BASE_URL with
$OPENAI_API_KEY (under `runner`, the LLM bridge sets both: a loopback relay and a per-trial
token). Each turn the model answers with one fenced ```bash block, which the agent runs in the
workspace and reports back (exit code and output); an answer without a block ends the task.
The model name is $REFERENCE_AGENT_MODEL, else the first model `GET /models` lists (the bridge
lists the trial's declared models). Every answer's `usage` becomes a `usage` event, so the
trajectory's final metrics are what the upstream reported.
"""

import json
import os
import re
import subprocess
import urllib.error
import urllib.request

SYSTEM = (
    "You operate a Linux shell to complete a task. Reply with exactly one fenced ```bash code "
    "block holding the commands to run next; you will get their exit code and output. When the "
    "task is complete, reply without a code block."
)
BLOCK = re.compile(r"```(?:bash|sh)?\n(.*?)```", re.DOTALL)
MAX_OUTPUT = 10_000
HTTP_TIMEOUT = 300


class ModelError(Exception):
    pass


def _request(method, path, body=None):
    base = os.environ.get("OPENAI_BASE_URL", "").rstrip("/")
    key = os.environ.get("OPENAI_API_KEY", "")
    if not base or not key:
        raise ModelError("model mode needs OPENAI_BASE_URL and OPENAI_API_KEY")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {key}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        detail = e.read(4096).decode("utf-8", "replace")
        raise ModelError(f"the model API answered {e.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ModelError(f"the model API is unreachable: {e}") from None


def choose_model():
    model = os.environ.get("REFERENCE_AGENT_MODEL")
    if model:
        return model
    listed = _request("GET", "/models").get("data") or []
    if not listed:
        raise ModelError("GET /models listed no model; set REFERENCE_AGENT_MODEL")
    return listed[0]["id"]


def run_model_task(task, max_turns, run_command, finish):
    """Runs `task` (see server.Task) by asking the model; `run_command(task, call_id, command)`
    runs one block and returns (exit code, output) or None when cancelled."""
    task.event(type="message", source="user", text=task.instruction)
    with task.lock:
        if task.cancel_requested:
            return finish(task, "cancelled")
        task.status = "running"
    try:
        model = choose_model()
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.instruction}]
        for turn in range(1, max_turns + 1):
            if task.cancel_requested:
                return finish(task, "cancelled")
            answer = _request("POST", "/chat/completions", {"model": model, "messages": messages})
            text = (answer.get("choices") or [{}])[0].get("message", {}).get("content") or ""
            usage = answer.get("usage") or {}
            block = BLOCK.search(text)
            if block is None:
                task.event(type="message", source="agent", text=text, model_name=model)
                record_usage(task, usage)
                return finish(task, "completed")
            call_id = f"call-{turn}"
            command = block.group(1)
            task.event(type="tool_call", call_id=call_id, name="bash", arguments={"command": command},
                       text=text, model_name=model)
            record_usage(task, usage)
            ran = run_command(task, call_id, command)
            if ran is None:
                return finish(task, "cancelled")
            code, output = ran
            messages.append({"role": "assistant", "content": text})
            messages.append({"role": "user", "content": f"exit code {code}\n{output[-MAX_OUTPUT:]}"})
        task.error = f"no answer without a code block within {max_turns} turns"
        return finish(task, "failed")
    except ModelError as e:
        task.error = str(e)
        task.event(type="message", source="agent", text=task.error)
        return finish(task, "failed")


def record_usage(task, usage):
    details = usage.get("prompt_tokens_details") or {}
    task.event(type="usage", prompt_tokens=usage.get("prompt_tokens"),
               completion_tokens=usage.get("completion_tokens"),
               cached_tokens=details.get("cached_tokens"))
