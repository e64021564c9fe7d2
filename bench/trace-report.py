#!/usr/bin/env python3
"""Where one trial's time goes: its trial.log phases with every engine call made meanwhile.

    bench/trace-report.py TRIAL_DIR TRACE_FILE

TRACE_FILE is bench/engine-trace.py's. The calls listed are those that started between the
trial's first trial.log line and the next thing the job did (another trial's first line, or
the trace's end); with one trial at a time they are the trial's own. Each call is put in the
phase that was running when it started; calls after the trial's `overhead:` line are its
removal, which the next trial does not wait for. Times are seconds from the trial's start;
`took` is the call's duration (to the end of its response body, or of its stream).
"""

import datetime as dt
import re
import sys
from collections import OrderedDict
from pathlib import Path

trial_dir, trace_file = Path(sys.argv[1]), sys.argv[2]
lines = (trial_dir / "trial.log").read_text(errors="replace").splitlines()
calls = []
for row in open(trace_file):
    parts = row.rstrip("\n").split("\t")
    if len(parts) < 7:
        continue
    start, _headers, end, _conn, method, path, status = parts[:7]
    detail = parts[7] if len(parts) > 7 else ""
    calls.append((float(start), float(end), method, path, status, detail))
calls.sort()
if not calls:
    sys.exit("no engine calls in the trace")

# trial.log stamps are UTC times of day; the day is the trace's.
day = dt.datetime.fromtimestamp(calls[0][0], dt.timezone.utc).replace(
    hour=0, minute=0, second=0, microsecond=0
)
stamp = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) (.*)$")


def epoch(h, m, s):
    t = day.timestamp() + int(h) * 3600 + int(m) * 60 + float(s)
    return t + 86400 if t < calls[0][0] - 43200 else t


events = []  # (time, text) of the runner's own lines that say where the trial is
for line in lines:
    match = stamp.match(line)
    if not match:
        continue
    text = match.group(4)
    if text.startswith(("phase:", "trial ", "overhead:", "verifier jail", "started ")):
        events.append((epoch(*match.groups()[:3]), text))
if not events:
    sys.exit("trial.log has no timestamped lines")
t0 = events[0][0]
done = next((t for t, text in events if text.startswith("overhead:")), events[-1][0])

# The trial's window: up to the first call of whatever came next (a later trial's config
# write is not an engine call, so the window ends at the trace's end or a gap of 2 s after
# the trial's end).
window = [c for c in calls if c[0] >= t0 - 0.002]
trial_calls = []
for call in window:
    if call[0] > done + 2.0:
        break
    trial_calls.append(call)


def short(path):
    path = re.sub(r"^/v1\.\d+", "", path)
    path = re.sub(r"[0-9a-f]{64}", lambda m: m.group(0)[:8], path)
    return path if len(path) <= 70 else path[:67] + "..."


def phase_at(t):
    current = "before the first phase"
    for when, text in events:
        if when > t:
            break
        if text.startswith("phase:") and text.endswith("started"):
            current = text[len("phase: ") : -len(" started")]
        elif text.startswith("overhead:"):
            current = "after the record (removal, not waited for)"
    return current


print(f"trial {trial_dir.name}: {len(trial_calls)} engine calls")
print(f"{'at':>8} {'took':>7}  what")
merged = [(t, None, text) for t, text in events] + [(c[0], c, None) for c in trial_calls]
merged.sort(key=lambda x: x[0])
per_phase = OrderedDict()
for t, call, text in merged:
    if call is None:
        print(f"{t - t0:8.3f} {'':>7}  -- {text}")
        continue
    start, took, method, path, status, detail = call
    what = f"{method} {short(path)} {status}" + (f"  [{detail}]" if detail else "")
    print(f"{start - t0:8.3f} {took:7.3f}  {what}")
    phase = phase_at(start)
    count, total = per_phase.get(phase, (0, 0.0))
    per_phase[phase] = (count + 1, total + took)

print()
print("per phase (phase time from trial.log; calls may overlap, so their sum can exceed it):")
durations = {}
for _, text in events:
    match = re.match(r"phase: (.*) finished in ([0-9.]+)s", text)
    if match:
        durations[match.group(1)] = float(match.group(2))
for phase, (count, total) in per_phase.items():
    took = durations.get(phase)
    took_text = f"{took:6.3f}s" if took is not None else "      -"
    print(f"  {phase:<44} {took_text}  {count:3d} calls, {total:6.3f}s in calls")
overhead = next((text for _, text in events if text.startswith("overhead:")), "")
print(f"  {overhead}")
