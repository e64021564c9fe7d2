#!/usr/bin/env python3
"""Reference installed agent for `runner`: a task API server on Python's standard library only.

By default it runs a deterministic plan (shell commands from plan.json, keyed by task name)
instead of calling a model, so benchmark results with it are reproducible. With `--mode model`
(or REFERENCE_AGENT_MODE=model) it asks a model for its commands instead (see model.py). It
exists to show and test the installed-agent contract:

  GET  /health                  -> {"status": "ok", "version": ...}
  POST /api/tasks               <- {"instruction", "workspace_root", "metadata": {...}}
                                -> {"id", "status"}
  GET  /api/tasks/{id}          -> {"id", "status", "exit_code", "error"}
  POST /api/tasks/{id}/cancel   -> {"id", "status"}   (kills the running command)

Every task writes an event log (JSONL) at <state dir>/tasks/<id>/events.jsonl in the format
the runner converts to ATIF (see README.md).
"""

import argparse
import datetime
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import model

VERSION = "1.0.0"
FINAL = {"completed", "failed", "cancelled"}


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def log(message):
    print(f"{now()} {message}", file=sys.stderr, flush=True)


class Task:
    def __init__(self, task_id, request, state_dir):
        self.id = task_id
        self.instruction = request.get("instruction", "")
        self.workspace_root = request.get("workspace_root") or os.getcwd()
        self.metadata = request.get("metadata") or {}
        self.status = "queued"
        self.exit_code = None
        self.error = None
        self.cancel_requested = False
        self.proc = None
        self.lock = threading.Lock()
        self.dir = os.path.join(state_dir, "tasks", task_id)
        os.makedirs(self.dir, exist_ok=True)
        self.events_path = os.path.join(self.dir, "events.jsonl")

    def event(self, **fields):
        fields.setdefault("timestamp", now())
        with open(self.events_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(fields) + "\n")

    def view(self):
        return {"id": self.id, "status": self.status, "exit_code": self.exit_code, "error": self.error}


def find_plan(plan, task):
    name = task.metadata.get("task_name")
    if name in plan:
        return name, plan[name]
    for key, entry in plan.items():
        match = entry.get("match") if isinstance(entry, dict) else None
        if match and match in task.instruction:
            return key, entry
    return None, None


def run_task(task, plan):
    task.event(type="message", source="user", text=task.instruction)
    key, entry = find_plan(plan, task)
    if entry is None:
        task.error = f"no plan for task {task.metadata.get('task_name')!r}"
        task.event(type="message", source="agent", text=task.error)
        finish(task, "failed")
        return
    steps = entry["steps"] if isinstance(entry, dict) else entry
    task.event(type="message", source="agent", text=f"Following the plan for {key}: {len(steps)} step(s).")
    with task.lock:
        if task.cancel_requested:
            finish(task, "cancelled")
            return
        task.status = "running"
    for index, step in enumerate(steps, start=1):
        call_id = f"call-{index}"
        command = step["command"]
        task.event(type="tool_call", call_id=call_id, name="bash", arguments={"command": command},
                   text=step.get("thought", ""))
        ran = run_command(task, call_id, command)
        if ran is None:
            break
        if ran[0] != 0:
            task.error = f"step {index} exited with {ran[0]}"
            finish(task, "failed")
            return
    finish(task, "cancelled" if task.cancel_requested else "completed")


def run_command(task, call_id, command):
    """Runs one command in the workspace and records its result; None when cancelled."""
    with task.lock:
        if task.cancel_requested:
            return None
        # Own session, so cancel can kill the whole command tree.
        task.proc = subprocess.Popen(["bash", "-c", command], cwd=task.workspace_root,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
    output, _ = task.proc.communicate()
    code = task.proc.returncode
    text = output.decode("utf-8", "replace")
    task.event(type="tool_result", call_id=call_id, output=text, exit_code=code)
    task.exit_code = code
    if task.cancel_requested:
        return None
    return code, text


def finish(task, status):
    with task.lock:
        task.status = status
        task.proc = None
    task.event(type="status", status=status)
    log(f"task {task.id} {status}")


def cancel(task):
    with task.lock:
        task.cancel_requested = True
        proc = task.proc
        if task.status == "queued":
            task.status = "cancelled"
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Handler(BaseHTTPRequestHandler):
    server_version = f"reference-agent/{VERSION}"

    def log_message(self, fmt, *args):
        log(fmt % args)

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def task_from_path(self, suffix=""):
        parts = self.path.split("?")[0].strip("/").split("/")
        expected = 3 + (1 if suffix else 0)
        if len(parts) != expected or parts[:2] != ["api", "tasks"] or (suffix and parts[3] != suffix):
            return None
        return self.server.tasks.get(parts[2])

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, {"status": "ok", "version": VERSION})
        task = self.task_from_path()
        if task is None:
            return self.reply(404, {"error": "not found"})
        return self.reply(200, task.view())

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        if self.path == "/api/tasks":
            try:
                request = json.loads(raw)
            except ValueError as e:
                return self.reply(400, {"error": f"body is not JSON: {e}"})
            with self.server.lock:
                self.server.counter += 1
                task_id = f"task-{self.server.counter}-{self.server.instance}"
                task = Task(task_id, request, self.server.state_dir)
                self.server.tasks[task.id] = task
            if self.server.mode == "model":
                target = lambda: model.run_model_task(task, self.server.max_turns, run_command, finish)
            else:
                target = lambda: run_task(task, self.server.plan)
            threading.Thread(target=target, daemon=True).start()
            log(f"task {task.id} accepted for {task.metadata.get('task_name')!r}")
            return self.reply(201, task.view())
        task = self.task_from_path("cancel")
        if task is None:
            return self.reply(404, {"error": "not found"})
        cancel(task)
        return self.reply(200, task.view())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--plan", default=os.path.join(here, "plan.json"))
    parser.add_argument("--state-dir", default=os.environ.get("AGENT_STATE_DIR", "/tmp/reference-agent"))
    parser.add_argument("--mode", choices=["plan", "model"],
                        default=os.environ.get("REFERENCE_AGENT_MODE", "plan"))
    parser.add_argument("--max-turns", type=int, default=8)
    # Task ids are the trajectories' session ids, which must be unique across a submission:
    # each trial starts its own server, so a random instance id per start qualifies them by
    # trial (a bare counter gave `task-1` in every container).
    parser.add_argument("--instance", default=secrets.token_hex(8),
                        help="the suffix of every task id (default: random per start)")
    parser.add_argument("--version", action="store_true")
    args = parser.parse_args()
    if args.version:
        print(VERSION)
        return
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    os.makedirs(args.state_dir, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.plan, server.state_dir, server.tasks = plan, args.state_dir, {}
    server.lock, server.counter, server.instance = threading.Lock(), 0, args.instance
    server.mode, server.max_turns = args.mode, args.max_turns
    what = f"plan {args.plan}" if args.mode == "plan" else f"model mode, {args.max_turns} turns"
    log(f"reference agent {VERSION} listening on 127.0.0.1:{args.port}, {what}")
    server.serve_forever()


if __name__ == "__main__":
    main()
