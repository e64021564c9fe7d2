#!/usr/bin/env python3
"""Per trial of a job: the time between the agent's end and the verifier's start, and the time
outside the agent and verifier phases (the trial's `overhead: wall` minus the two phases).

    bench/phase-gaps.py JOB_DIR

Reads each trial's result.json (`agent_execution`, `verifier`) and trial.log (`overhead: wall`,
which leaves out the wait for the task's image). Prints the median and mean of both over the
trials that had both phases. Used for the examples' figure in bench/README.md:
`runner run --path tasks/examples --agent oracle --k 5 --n-concurrent 4`.
"""

import datetime as dt
import json
import re
import statistics
import sys
from pathlib import Path


def when(text):
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


gaps, outside = [], []
for result_file in sorted(Path(sys.argv[1]).glob("*/result.json")):
    result = json.loads(result_file.read_text())
    agent, verifier = result.get("agent_execution"), result.get("verifier")
    if not (agent and verifier and agent.get("finished_at") and verifier.get("finished_at")):
        continue
    log = (result_file.parent / "trial.log").read_text(errors="replace")
    walls = re.findall(r"overhead: wall ([0-9.]+)s", log)
    if not walls:
        continue
    agent_took = (when(agent["finished_at"]) - when(agent["started_at"])).total_seconds()
    verifier_took = (when(verifier["finished_at"]) - when(verifier["started_at"])).total_seconds()
    gaps.append((when(verifier["started_at"]) - when(agent["finished_at"])).total_seconds())
    outside.append(float(walls[-1]) - agent_took - verifier_took)
if not gaps:
    sys.exit("no trial with an agent and a verifier phase")
print(f"trials: {len(gaps)}")
print(
    f"agent end -> verifier start: median {statistics.median(gaps):.3f}s, mean {statistics.mean(gaps):.3f}s"
)
print(
    f"outside the agent and verifier phases: median {statistics.median(outside):.3f}s, "
    f"mean {statistics.mean(outside):.3f}s"
)
