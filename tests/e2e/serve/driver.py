"""Drives `runner serve` as a trainer would: openenv-core's generic client (its WebSocket
session, `reset`/`step`/`state`) with the Terminal-Bench wrapper's action and observation
models (tbench2_models.py). Each subcommand checks what it did and exits non-zero, with the
reason on stderr, when the server did not answer as it must.

    driver.py schema   URL FIXTURE          /schema == the wrapper's models == the fixture
    driver.py oracle   URL TASKS NAME...    the oracle's commands as exec, then evaluate: 1
                                            (a multi-step task's: each step's, step by step)
    driver.py nothing  URL NAME             evaluate with no action: 0
    driver.py planted  URL NAME             a reward file planted by the policy, then
                                            evaluate: 0 (the verifier writes its own)
    driver.py gate     URL NAME             a multi-step task's first step left undone:
                                            its min_reward stops the episode at 0
    driver.py setup-fails URL NAME          a multi-step task whose second step's setup
                                            fails: the first evaluate ends it at 0
    driver.py timeout  URL TASKS NAME       an oracle slower than --exec-timeout: killed, 0
                                            (the client pings every second meanwhile)
    driver.py hostile  URL TASK             hostile actions; a bystander session goes on
    driver.py capacity URL TASK             a full server refuses; an idle session closes
    driver.py strangers URL             a foreign Host or Origin is refused (403) on HTTP
                                            and on the WebSocket; the stock client is served
    driver.py credential URL TOKEN TASKS NAME   without the credential 401 (HTTP, WebSocket,
                                            the stock client); the stock client with it in
                                            its base URL runs NAME's oracle to 1
    driver.py isolation URL TASK            one session's server is out of another's reach
    driver.py long-output URL TASK          outputs over the cap come back marked, dropped
                                            bytes counted (exec and a background view)
    driver.py bench    URL TASKS NAME N IMAGE   N sessions at once; exec latency vs docker exec
"""

import asyncio
import base64
import contextlib
import os
import socket
import json
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from tbench2_models import Tbench2Action, Tbench2Observation, wrapper_schema  # noqa: E402
import websockets  # noqa: E402

# Long enough for an image build and the verifier on a loaded machine.
MESSAGE_TIMEOUT_S = 600.0


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def client(url):
    return GenericEnvClient(base_url=url, message_timeout_s=MESSAGE_TIMEOUT_S)


def typed(result):
    """The observation as the wrapper's model (refusing a field it does not define)."""
    data = dict(result.observation)
    data["reward"] = result.reward
    data["done"] = result.done
    return Tbench2Observation.model_validate(data)


async def step(env, **fields):
    return await env.step(Tbench2Action(**fields))


def oracle_commands(tasks, name):
    short = name.split("/")[-1]
    return (Path(tasks) / short / "solution" / "solve.sh").read_text()


def step_names(tasks, name):
    """A multi-step task's steps in order (from its task.toml), or [] for a single step."""
    import tomllib

    short = name.split("/")[-1]
    config = tomllib.loads((Path(tasks) / short / "task.toml").read_text())
    return [step["name"] for step in config.get("steps", [])]


def same_instruction(served, file_text):
    """The served instruction is the file's (the loader drops its leading canary comment)."""
    return bool(served.strip()) and file_text.rstrip().endswith(served.strip())


def step_file(tasks, name, step, *parts):
    return (Path(tasks) / name.split("/")[-1] / "steps" / step).joinpath(*parts).read_text()


def http_get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def http_post(url, body, content_type="application/json"):
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def diff(a, b, path=""):
    """The paths where two JSON values differ."""
    if type(a) is not type(b):
        return [f"{path or '/'}: {json.dumps(a)} != {json.dumps(b)}"]
    if isinstance(a, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a:
                out.append(f"{path}/{key}: only in the second")
            elif key not in b:
                out.append(f"{path}/{key}: only in the first")
            else:
                out += diff(a[key], b[key], f"{path}/{key}")
        if list(a) != list(b) and not out:
            out.append(f"{path}: field order {list(a)} != {list(b)}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {json.dumps(a)} != {json.dumps(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}/{i}")]
    return [] if a == b else [f"{path}: {json.dumps(a)} != {json.dumps(b)}"]


def cmd_schema(url, fixture):
    served = http_get(f"{url}/schema")
    models = wrapper_schema()
    kept = json.loads(Path(fixture).read_text())
    problems = diff(served, models) + diff(kept, models)
    check(not problems, "the schemas differ (served or fixture vs models):\n" + "\n".join(problems))
    check(http_get(f"{url}/health").get("status") == "healthy", "/health")
    print(f"schema: {len(served['action']['properties'])} action fields, "
          f"{len(served['observation']['properties'])} observation fields match")


@contextlib.asynccontextmanager
async def session(url, task):
    """One episode of `task`: the client and its first observation; closed however it ends."""
    env = client(url)
    try:
        first = await env.reset(task_id=task)
        yield env, first
    finally:
        await env.close()


async def run_oracle(url, tasks, name):
    if step_names(tasks, name):
        return await run_oracle_steps(url, tasks, name)
    async with session(url, name) as (env, first):
        obs = typed(first)
        check(obs.task_id == name, f"{name}: reset answered task {obs.task_id!r}")
        check(obs.instruction.strip(), f"{name}: no instruction")
        check(first.reward == 0.0 and not first.done, f"{name}: reset reward/done")
        ran = await step(env, action_type="exec", command=oracle_commands(tasks, name))
        check(typed(ran).success, f"{name}: the oracle failed: {ran.observation}")
        state = await env.state()
        check(state.get("step_count") == 1 and state.get("task_id") == name,
              f"{name}: state after one step: {state}")
        graded = await step(env, action_type="evaluate")
        obs = typed(graded)
        check(graded.done, f"{name}: evaluate did not end the episode")
        check(graded.reward == 1.0,
              f"{name}: reward {graded.reward}: {json.dumps(graded.observation)[:2000]}")
        meta = obs.metadata
        check("assertions_passed" in meta and "assertions_total" in meta,
              f"{name}: no assertions_passed/assertions_total in {meta}")
        return name, graded.reward, meta.get("assertions_passed"), meta.get("assertions_total")


async def run_oracle_steps(url, tasks, name):
    """Each step's oracle as exec, then evaluate: every step but the last goes on with the
    next step's instruction; the last ends the episode with the trial's reward."""
    steps = step_names(tasks, name)
    async with session(url, name) as (env, first):
        obs = typed(first)
        check(same_instruction(obs.instruction, step_file(tasks, name, steps[0], "instruction.md")),
              f"{name}: reset's instruction is not step {steps[0]}'s: {obs.instruction!r}")
        check(obs.metadata.get("step") == steps[0] and obs.metadata.get("steps_total") == len(steps),
              f"{name}: reset metadata {obs.metadata}")
        for index, current in enumerate(steps):
            solve = step_file(tasks, name, current, "solution", "solve.sh")
            ran = await step(env, action_type="exec", command=solve)
            check(typed(ran).success, f"{name} step {current}: the oracle failed: {ran.observation}")
            graded = await step(env, action_type="evaluate")
            obs = typed(graded)
            meta = obs.metadata
            check(meta.get("step") == current and meta.get("step_reward") == 1.0,
                  f"{name} step {current}: {json.dumps(graded.observation)[:2000]}")
            if index + 1 < len(steps):
                following = steps[index + 1]
                check(not graded.done and graded.reward == 1.0,
                      f"{name} step {current}: done {graded.done}, reward {graded.reward}")
                check(meta.get("next_step") == following and same_instruction(
                      obs.instruction, step_file(tasks, name, following, "instruction.md")),
                      f"{name} step {current}: the next step is not {following}: {meta}")
            else:
                check(graded.done and graded.reward == 1.0,
                      f"{name}: the last step: done {graded.done}, reward {graded.reward}: {meta}")
                check(meta.get("step_rewards") == [1.0] * len(steps),
                      f"{name}: step rewards {meta.get('step_rewards')}")
        return name, graded.reward, meta.get("assertions_passed"), meta.get("assertions_total")


async def cmd_planted(url, name):
    async with session(url, name) as (env, _first):
        plant = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"
        ran = await step(env, action_type="exec", command=plant)
        check(typed(ran).success, f"planting a reward: {ran.observation}")
        graded = await step(env, action_type="evaluate")
        check(graded.done and graded.reward == 0.0,
              f"a planted reward counted: reward {graded.reward}, done {graded.done}")
        print(f"planted {name}: reward {graded.reward}")


async def cmd_gate(url, name):
    async with session(url, name) as (env, first):
        graded = await step(env, action_type="evaluate")
        meta = typed(graded).metadata
        check(graded.done and graded.reward == 0.0,
              f"a failed gated first step: done {graded.done}, reward {graded.reward}: {meta}")
        check(meta.get("step") == typed(first).metadata.get("step")
              and "min_reward" in str(meta.get("stopped")) and meta.get("step_rewards") == [0.0],
              f"the gate's stop is not in the metadata: {meta}")
        print(f"gate {name}: stopped after step {meta.get('step')}, reward {graded.reward}")


async def cmd_setup_fails(url, name):
    async with session(url, name) as (env, _first):
        graded = await step(env, action_type="evaluate")
        obs = typed(graded)
        meta = obs.metadata
        check(graded.done and graded.reward == 0.0 and not obs.success,
              f"a next step that cannot be set up: done {graded.done}, reward {graded.reward}: "
              f"{graded.observation}")
        check(meta.get("step_reward") == 1.0 and meta.get("step_rewards") == [1.0, 0.0]
              and "setup.sh" in str(meta.get("stopped")),
              f"the failed setup is not in the metadata: {meta}")
        print(f"setup-fails {name}: {meta.get('stopped')}")


async def cmd_oracle(url, tasks, names):
    results = await asyncio.gather(*(run_oracle(url, tasks, n) for n in names))
    for name, reward, passed, total in results:
        print(f"oracle {name}: reward {reward}, assertions {passed}/{total}")


async def cmd_nothing(url, name):
    async with session(url, name) as (env, _first):
        graded = await step(env, action_type="evaluate")
        check(graded.done and graded.reward == 0.0,
              f"evaluate with no action: reward {graded.reward}, done {graded.done}")
        print(f"nothing {name}: reward {graded.reward}")


def eager_pings():
    """Makes the client ping every second and give up after one without a pong (its default
    is 20 s and 20 s), so a server that stops answering pings while an action runs loses the
    connection within the 10 s command below."""
    import functools
    import openenv.core.env_client as env_client

    env_client.ws_connect = functools.partial(env_client.ws_connect, ping_interval=1,
                                              ping_timeout=1)


async def cmd_timeout(url, tasks, name):
    eager_pings()
    async with session(url, name) as (env, _first):
        started = time.monotonic()
        ran = await step(env, action_type="exec", command=oracle_commands(tasks, name))
        took = time.monotonic() - started
        obs = typed(ran)
        check(not obs.success and obs.info.get("timed_out") is True,
              f"a command past --exec-timeout was not cut: {ran.observation}")
        check(took < 45, f"the capped command took {took:.1f} s")
        graded = await step(env, action_type="evaluate")
        check(graded.done and graded.reward == 0.0, f"reward {graded.reward}")
        print(f"timeout {name}: killed after {took:.1f} s, reward {graded.reward}")


class Bystander:
    """A session with a live episode that must keep answering while others misbehave."""

    def __init__(self, url, task):
        self.url, self.task, self.env, self.count = url, task, None, 0

    async def start(self):
        self.env = client(self.url)
        await self.env.reset(task_id=self.task)

    async def alive(self, after):
        self.count += 1
        ran = await step(self.env, action_type="exec", command=f"echo alive {self.count}")
        obs = typed(ran)
        check(obs.success and obs.output.strip() == f"alive {self.count}",
              f"after {after}, the bystander's exec answered {ran.observation}")
        check(http_get(f"{self.url}/health").get("status") == "healthy", f"/health after {after}")
        print(f"  bystander answered after {after}")


async def episode(url, task):
    env = client(url)
    await env.reset(task_id=task)
    return env


async def ended_or_alive(env, what):
    """After a hostile action the episode either still answers or says it is over."""
    ran = await step(env, action_type="exec", command="echo still")
    if ran.done:
        check(not typed(ran).success, f"{what}: a closed episode claimed success")
        return "closed"
    obs = typed(ran)
    check(obs.success and obs.output.strip() == "still", f"{what}: then {ran.observation}")
    return "alive"


async def hostile_paths(url, task):
    env = await episode(url, task)
    try:
        for path in ["../../../etc/evil", "/etc/evil", "/app/../etc/evil", "/proc/1/root/etc/evil"]:
            out = typed(await step(env, action_type="write_file", file_path=path, content="x"))
            check(not out.success and out.error, f"write_file {path} was not refused: {out}")
        await step(env, action_type="exec", command="ln -s /etc /app/escape")
        out = typed(await step(env, action_type="write_file", file_path="/app/escape/evil",
                               content="x"))
        check(not out.success, f"write_file through a symlink was not refused: {out}")
        probe = typed(await step(env, action_type="exec",
                                 command="ls /etc/evil 2>/dev/null; echo checked"))
        check(probe.output.strip() == "checked", f"a file escaped: {probe.output!r}")
        ok = typed(await step(env, action_type="write_file", file_path="notes/a.txt",
                              content="inside\n"))
        check(ok.success, f"a path inside the workdir was refused: {ok}")
    finally:
        await env.close()
    return "refused"


async def hostile_exec(url, task, command, what):
    env = await episode(url, task)
    try:
        started = time.monotonic()
        ran = await step(env, action_type="exec", command=command)
        took = time.monotonic() - started
        if ran.done:
            return f"closed after {took:.1f} s"
        return f"{await ended_or_alive(env, what)} after {took:.1f} s " \
               f"(success={typed(ran).success})"
    finally:
        await env.close()


async def hostile_output(url, task):
    env = await episode(url, task)
    try:
        ran = typed(await step(env, action_type="exec", command="yes"))
        check(ran.info.get("truncated") is True and ran.info.get("timed_out") is True,
              f"endless output: {ran.info}")
        check(len(ran.output.encode()) < 64 * 1024, f"{len(ran.output)} bytes came back")
        check("cut" in ran.output.splitlines()[-1] or "truncated" in ran.output.splitlines()[-1],
              f"no marker at the end: {ran.output[-300:]!r}")
        await step(env, action_type="exec", command="yes", block=False, session_id="flood")
        seen = typed(await step(env, action_type="wait", session_id="flood", wait_seconds=2))
        check(len(seen.output.encode()) < 64 * 1024, "a background flood came back whole")
        return f"cut at {len(ran.output.encode())} bytes, {await ended_or_alive(env, 'yes')}"
    finally:
        await env.close()


async def hostile_disk(url, task):
    env = await episode(url, task)
    try:
        ran = await step(env, action_type="exec",
                         command="head -c 1200M /dev/zero > /app/fill; echo wrote")
        for _ in range(30):
            if not ran.done:
                await asyncio.sleep(1)
                ran = await step(env, action_type="exec", command="echo still")
            if ran.done:
                obs = typed(ran)
                check("storage_mb" in obs.error, f"closed for another reason: {obs.error}")
                return f"closed: {obs.error[:80]}"
        fail("an episode past its storage_mb was not closed")
    finally:
        await env.close()


async def hostile_saboteur(url, task):
    """The answer is right, and processes the policy leaves wait for the verifier to start
    (it deletes planted reward files first) to break it: every one must be dead before the
    verifier runs, so the reward is 1 (a survivor would make it 0)."""
    env = await episode(url, task)
    try:
        await step(env, action_type="exec",
                   command="echo 'Hello, world!' > /app/hello.txt; "
                           "echo 0 > /logs/verifier/reward.txt")
        saboteur = ("while [ -e /logs/verifier/reward.txt ]; do sleep 0.02; done; "
                    "echo wrong > /app/hello.txt")
        await step(env, action_type="exec", command=saboteur, block=False, session_id="bg")
        await step(env, action_type="exec",
                   command=f"setsid nohup bash -c '{saboteur}' >/dev/null 2>&1 & echo left")
        graded = await step(env, action_type="evaluate")
        check(graded.reward == 1.0, f"a leftover process changed the grade: {graded.observation}")
        return "reward 1 (leftovers killed before the verifier)"
    finally:
        await env.close()


async def hostile_messages(url, task):
    ws_url = url.replace("http://", "ws://") + "/ws"
    results = []
    async with websockets.connect(ws_url, max_size=None) as ws:
        for raw, code in [
            ("{not json", "INVALID_JSON"),
            (json.dumps({"type": "fly"}), "UNKNOWN_TYPE"),
            (json.dumps({"type": "step", "data": {"cmd": "ls"}}), "VALIDATION_ERROR"),
            (json.dumps({"type": "step", "data": {"block": "yes"}}), "VALIDATION_ERROR"),
            (json.dumps({"type": "step", "data": {"command": "ls"}}), "EXECUTION_ERROR"),
            (json.dumps({"type": "reset", "data": {"task_id": "no/such-task"}}),
             "EXECUTION_ERROR"),
            (b"\x00\x01binary", "INVALID_JSON"),
        ]:
            await ws.send(raw)
            reply = json.loads(await asyncio.wait_for(ws.recv(), 60))
            check(reply.get("type") == "error" and reply["data"].get("code") == code,
                  f"{raw!r}: {reply}")
            results.append(code)
    async with websockets.connect(ws_url, max_size=None) as ws:
        try:
            # The server may close the connection while the message is still going out.
            await ws.send(json.dumps({"type": "step", "data": {"command": "x" * (17 << 20)}}))
            reply = await asyncio.wait_for(ws.recv(), 60)
            fail(f"an oversized message was answered: {reply[:200]}")
        except websockets.ConnectionClosed:
            results.append("oversized: closed")
    status, _ = http_post(f"{url}/step", b"{]")
    check(400 <= status < 500, f"malformed HTTP /step: {status}")
    status, _ = http_post(f"{url}/step", json.dumps({"action": {"cmd": 1}}).encode())
    check(status == 422, f"invalid HTTP /step action: {status}")
    status, _ = http_post(f"{url}/reset", b"{" + b" " * (17 << 20) + b"}")
    check(status == 413, f"oversized HTTP /reset: {status}")
    results.append("HTTP 4xx")
    return ", ".join(results)


async def cmd_hostile(url, task):
    bystander = Bystander(url, task)
    await bystander.start()
    cases = [
        ("write_file path escapes", lambda: hostile_paths(url, task)),
        ("fork bomb", lambda: hostile_exec(url, task, "b() { b | b & }; b", "fork bomb")),
        ("endless output", lambda: hostile_output(url, task)),
        ("kill -9 -1", lambda: hostile_exec(url, task, "kill -9 -1; sleep 1; echo x", "kill -1")),
        ("killing PID 1", lambda: hostile_exec(url, task, "kill -9 1; kill -TERM 1; sleep 1",
                                               "kill 1")),
        ("filling the disk", lambda: hostile_disk(url, task)),
        ("leftover saboteurs", lambda: hostile_saboteur(url, task)),
        ("malformed and oversized requests", lambda: hostile_messages(url, task)),
    ]
    for what, case in cases:
        outcome = await case()
        print(f"hostile {what}: {outcome}")
        await bystander.alive(what)
    graded = await step(bystander.env, action_type="evaluate")
    check(graded.done and graded.reward == 0.0, f"the bystander's evaluate: {graded.reward}")
    await bystander.env.close()


async def cmd_capacity(url, task):
    first = client(url)
    await first.reset(task_id=task)
    second = client(url)
    try:
        await second.reset(task_id=task)
        fail("a second session was accepted by a server of --max-sessions 1")
    except RuntimeError as e:
        check("CAPACITY_REACHED" in str(e), f"a full server answered {e}")
        print(f"capacity: {e}")
    finally:
        await second.close()
    await asyncio.sleep(6)
    try:
        await step(first, action_type="exec", command="echo late")
        fail("an idle session was not closed")
    except (RuntimeError, websockets.ConnectionClosed) as e:
        print(f"idle: {e}")
    await first.close()
    third = client(url)
    try:
        ran = await third.reset(task_id=task)
        check(typed(ran).task_id == task, "after the idle close, a new session did not start")
        print("capacity: a new session starts once the idle one is closed")
    finally:
        await third.close()


def percentiles(samples):
    samples = sorted(samples)
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]  # noqa: E731
    return (f"n={len(samples)} mean={statistics.mean(samples) * 1000:.0f} ms "
            f"p50={pick(0.5) * 1000:.0f} ms p95={pick(0.95) * 1000:.0f} ms")


async def bench_session(url, tasks, name, rounds, latencies, barrier=None):
    async with session(url, name) as (env, _first):
        if barrier is not None:
            # Every session's container is up before any exec is timed.
            await barrier.wait()
        for i in range(rounds):
            started = time.monotonic()
            ran = await step(env, action_type="exec", command=f"echo {i}")
            latencies.append(time.monotonic() - started)
            check(typed(ran).output.strip() == str(i), f"echo {i}: {ran.observation}")
        await step(env, action_type="exec", command=oracle_commands(tasks, name))
        graded = await step(env, action_type="evaluate")
        return graded.reward


async def cmd_bench(url, tasks, name, sessions, image):
    rounds = 10
    latencies = []
    started = time.monotonic()
    barrier = asyncio.Barrier(sessions)
    rewards = await asyncio.gather(
        *(bench_session(url, tasks, name, rounds, latencies, barrier) for _ in range(sessions)))
    took = time.monotonic() - started
    check(all(r == 1.0 for r in rewards), f"rewards {rewards}")
    print(f"bench: {sessions} sessions at once completed in {took:.1f} s, all reward 1")
    print(f"bench: runner serve exec round trip ({sessions} sessions at once): "
          f"{percentiles(latencies)}")
    # One session alone, then raw docker exec alone and N at once, in the same run.
    alone = []
    await bench_session(url, tasks, name, 30, alone)
    print(f"bench: runner serve exec round trip (one session): {percentiles(alone)}")
    names = []
    try:
        for i in range(sessions):
            cname = f"runner-serve-bench-{i}-{int(time.time())}"
            subprocess.run(["docker", "run", "-d", "--rm", "--network", "none",
                            "--label", "runner.serve-bench=1", "--name", cname, image,
                            "sleep", "3600"], check=True, capture_output=True)
            names.append(cname)

        async def one(cname, count):
            out = []
            for i in range(count):
                t = time.monotonic()
                proc = await asyncio.create_subprocess_exec(
                    "docker", "exec", cname, "sh", "-c", f"echo {i}",
                    stdout=asyncio.subprocess.PIPE)
                await proc.communicate()
                out.append(time.monotonic() - t)
            return out

        solo = await one(names[0], 30)
        print(f"bench: raw docker exec round trip (one container): {percentiles(solo)}")
        many = [x for xs in await asyncio.gather(*(one(n, rounds) for n in names)) for x in xs]
        print(f"bench: raw docker exec round trip ({sessions} containers at once): "
              f"{percentiles(many)}")
    finally:
        if names:
            subprocess.run(["docker", "rm", "-f", *names], capture_output=True)


def raw_status(url, path, headers, upgrade=False):
    """Sends one GET by hand (so Host can be anything) and returns (status, head)."""
    parts = urlsplit(url)
    lines = [f"GET {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
    if upgrade:
        key = base64.b64encode(os.urandom(16)).decode()
        lines += ["Upgrade: websocket", "Connection: Upgrade",
                  f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    else:
        lines.append("Connection: close")
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    text = head.decode(errors="replace")
    return int(text.split(" ", 2)[1]), text


def ws_url(url):
    parts = urlsplit(url)
    return urlunsplit(("ws", parts.netloc, "/ws", "", ""))


async def ws_refused(url, **kwargs):
    """The status a WebSocket handshake through the `websockets` library is refused with."""
    try:
        async with websockets.connect(ws_url(url), open_timeout=30, **kwargs):
            return None
    except websockets.exceptions.InvalidStatus as e:
        return e.response.status_code


async def cmd_strangers(url, allowed_host, allowed_origin):
    netloc = urlsplit(url).netloc
    port = urlsplit(url).port
    own = {"Host": netloc}
    for upgrade, what in [(False, "HTTP /health"), (True, "WebSocket /ws")]:
        path = "/ws" if upgrade else "/health"
        status, head = raw_status(url, path, own, upgrade)
        check(status == (101 if upgrade else 200), f"{what} with its own Host: {head}")
        for headers, why in [
            ({"Host": f"evil.example:{port}"}, "a foreign Host"),
            ({"Host": "evil.example"}, "a foreign Host without a port"),
            ({"Host": f"localhost.evil.example:{port}"}, "a Host that starts like localhost"),
            ({**own, "Origin": "http://evil.example"}, "a foreign Origin"),
            ({**own, "Origin": "null"}, "the null Origin"),
            ({**own, "Origin": f"http://127.0.0.1:{port}"}, "an Origin not allowed"),
        ]:
            status, head = raw_status(url, path, headers, upgrade)
            check(status == 403, f"{what} with {why}: {head}")
        allowed = {"Host": f"{allowed_host}:{port}", "Origin": allowed_origin}
        status, head = raw_status(url, path, allowed, upgrade)
        check(status == (101 if upgrade else 200), f"{what} from the allowed origin: {head}")
    refused = await ws_refused(url, origin="http://evil.example")
    check(refused == 403, f"websockets with Origin http://evil.example: {refused}")
    # The stock client sends no Origin and the server's own Host: it is served.
    env = client(url)
    try:
        await env.connect()
        state = await env.state()
        check(state is not None, "the stock client's state")
    finally:
        await env.close()
    print("strangers: foreign Host and Origin refused (403) on HTTP and WebSocket")


def with_credential(url, token):
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, f"runner:{token}@{parts.netloc}", parts.path, "", ""))


async def cmd_credential(url, token, tasks, name):
    netloc = urlsplit(url).netloc
    own = {"Host": netloc}
    bearer = {**own, "Authorization": f"Bearer {token}"}
    wrong = {**own, "Authorization": "Basic " + base64.b64encode(b"runner:wrong").decode()}
    for upgrade, what in [(False, "HTTP /health"), (True, "WebSocket /ws")]:
        path = "/ws" if upgrade else "/health"
        for headers, why in [(own, "no credential"), (wrong, "a wrong credential")]:
            status, head = raw_status(url, path, headers, upgrade)
            check(status == 401, f"{what} with {why}: {head}")
            check("www-authenticate: basic" in head.lower(), f"{what}: no Basic challenge: {head}")
        status, head = raw_status(url, path, bearer, upgrade)
        check(status == (101 if upgrade else 200), f"{what} with the credential as Bearer: {head}")
    # The stock client without the credential cannot open a session...
    env = client(url)
    try:
        await env.connect()
        fail("the stock client connected without the credential")
    except ConnectionError as e:
        check("401" in str(e), f"the stock client without the credential: {e}")
    finally:
        await env.close()
    # ...and with it in its base URL, unchanged, runs an episode to its reward.
    print(await run_oracle(with_credential(url, token), tasks, name))
    print("credential: required (401 without it); the stock client with it in its URL works")


FETCH = ("python3 -c \"import sys, urllib.request; "
         "print(urllib.request.urlopen('http://{ip}:9999/', timeout=5).status)\"")


async def cmd_isolation(url, task):
    a = await episode(url, task)
    b = await episode(url, task)
    try:
        ips = []
        for env, who in [(a, "A"), (b, "B")]:
            ran = typed(await step(env, action_type="exec", command="hostname -I"))
            words = ran.output.split()
            check(ran.success and words, f"session {who} has no address: {ran.output!r}")
            ips.append(words[0])
        check(ips[0] != ips[1], f"both sessions have address {ips[0]}")
        await step(b, action_type="exec", block=False, session_id="srv",
                   command="mkdir -p /tmp/share && cd /tmp/share && echo b-secret > listing "
                           "&& exec python3 -m http.server 9999 --bind 0.0.0.0")
        fetch = FETCH.format(ip=ips[1])
        deadline = time.monotonic() + 60
        while True:
            own = typed(await step(b, action_type="exec", command=fetch))
            if own.success and own.output.strip() == "200":
                break
            check(time.monotonic() < deadline, f"B's server never answered B: {own.output!r}")
            await asyncio.sleep(1)
        other = typed(await step(a, action_type="exec", command=fetch))
        check(not other.success and "200" not in other.output.split(),
              f"session A reached session B's server at {ips[1]}:9999: {other.output!r}")
        print(f"isolation: B ({ips[1]}) serves itself; A ({ips[0]}) cannot reach it: "
              f"{other.output.strip().splitlines()[-1] if other.output.strip() else other.error}")
    finally:
        await a.close()
        await b.close()


CAP = 64 * 1024


def check_marked(obs, what, dropped):
    info = obs.info
    check(info.get("truncated") is True, f"{what}: truncated is {info.get('truncated')!r}")
    check(info.get("bytes_dropped") == dropped,
          f"{what}: bytes_dropped {info.get('bytes_dropped')!r}, not {dropped}")
    last = obs.output.splitlines()[-1]
    check("output truncated" in last and f"{dropped} bytes dropped" in last,
          f"{what}: no marker line at the end: {last!r}")
    size = len(obs.output.encode())
    check(CAP < size < CAP + 200, f"{what}: {size} bytes came back")


async def cmd_long_output(url, task):
    env = await episode(url, task)
    try:
        small = typed(await step(env, action_type="exec", command="echo small"))
        check(small.output == "small\n" and small.info.get("truncated") is False
              and small.info.get("bytes_dropped") == 0, f"a small output: {small}")
        for command, size in [
            ("head -c 1000000 /dev/zero | tr '\\0' x", 1_000_000),
            ("python3 -c \"print('y' * 69999)\"", 70_000),
            ("seq 1 100000", 588_895),
            ("head -c 1000000 /dev/zero | tr '\\0' z >&2", 1_000_000),
        ]:
            ran = typed(await step(env, action_type="exec", command=command))
            check(ran.success, f"{command}: {ran.error}")
            check_marked(ran, command, size - CAP)
        await step(env, action_type="exec", command="seq 1 100000; sleep 60", block=False,
                   session_id="long")
        seen = typed(await step(env, action_type="wait", session_id="long", wait_seconds=3))
        info = seen.info
        check(info.get("truncated") is True and info.get("bytes_remaining") == 588_895 - CAP,
              f"a background view: {info}")
        last = seen.output.splitlines()[-1]
        check("output truncated" in last and f"{588_895 - CAP} more bytes" in last,
              f"a background view: no marker line: {last!r}")
        rest = typed(await step(env, action_type="view", session_id="long"))
        whole = "".join(f"{i}\n" for i in range(1, 100001))
        read = [o.split("\n[output truncated", 1)[0] for o in (seen.output, rest.output)]
        check(whole.startswith(read[0] + read[1]) and len(read[1]) == CAP,
              f"the next view does not go on where the first stopped: {rest.info}")
        print(f"long output: 1 MB, 70 KB, seq 1 100000 and stderr marked; background view "
              f"marked with {info['bytes_remaining']} bytes to come")
    finally:
        await env.close()


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    command, url, rest = argv[0], argv[1].rstrip("/"), argv[2:]
    if command == "schema":
        cmd_schema(url, rest[0])
    elif command == "oracle":
        asyncio.run(cmd_oracle(url, rest[0], rest[1:]))
    elif command == "nothing":
        asyncio.run(cmd_nothing(url, rest[0]))
    elif command == "planted":
        asyncio.run(cmd_planted(url, rest[0]))
    elif command == "gate":
        asyncio.run(cmd_gate(url, rest[0]))
    elif command == "setup-fails":
        asyncio.run(cmd_setup_fails(url, rest[0]))
    elif command == "timeout":
        asyncio.run(cmd_timeout(url, rest[0], rest[1]))
    elif command == "hostile":
        asyncio.run(cmd_hostile(url, rest[0]))
    elif command == "capacity":
        asyncio.run(cmd_capacity(url, rest[0]))
    elif command == "strangers":
        asyncio.run(cmd_strangers(url, rest[0], rest[1]))
    elif command == "credential":
        asyncio.run(cmd_credential(url, rest[0], rest[1], rest[2]))
    elif command == "isolation":
        asyncio.run(cmd_isolation(url, rest[0]))
    elif command == "long-output":
        asyncio.run(cmd_long_output(url, rest[0]))
    elif command == "bench":
        asyncio.run(cmd_bench(url, rest[0], rest[1], int(rest[2]), rest[3]))
    else:
        fail(f"unknown subcommand {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
