#!/usr/bin/env bash
# Peak RSS of the runner and the size of the job directory when an agent writes without end
# (tasks/hostile/endless-output: `yes` on stdout, into /logs/agent and into the runner's exec
# stream until the agent deadline), with the default caps (1024 MB of downloads, 100 MB of
# trial.log per trial) unless flags say otherwise.
#
#   bench/containment.sh [AGENT_SECONDS] [extra runner flags...]   default: 30 s, as in issue 9
#
# PROFILE=release builds and measures the release binary (default: the dev build).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"; shift || true
profile="${PROFILE:-dev}"
bash scripts/base-image.sh >/dev/null
if [ "$profile" = release ]; then
    cargo build --release -q -p runner; bin=target/release/runner
else
    cargo build -q -p runner; bin=target/debug/runner
fi
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
jobs=$(mktemp -d)
trap 'rm -rf "$jobs"' EXIT
# The task's agent deadline is 4 s; the multiplier stretches it to the requested length.
multiplier=$(awk -v s="$seconds" 'BEGIN { printf "%.3f", s / 4 }')
/usr/bin/time -v -o "$jobs/time.txt" "$bin" run --path tasks/hostile/endless-output --agent oracle \
    --agent-timeout-multiplier "$multiplier" --jobs-dir "$jobs" --job-name bench "$@" \
    >"$jobs/out.txt" 2>&1 || true
rss_kib=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$jobs/time.txt")
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$jobs/time.txt")
trial=$(find "$jobs/bench" -mindepth 1 -maxdepth 1 -type d | head -n 1)
echo "endless output for ${seconds}s of agent time (profile $profile), job wall $wall"
echo "runner peak RSS: $((rss_kib / 1024)) MiB"
echo "job dir: $(du -sm "$jobs/bench" | cut -f1) MiB (agent/ $(du -sm "$trial/agent" | cut -f1) MiB, artifacts/ $(du -sm "$trial/artifacts" | cut -f1) MiB, trial.log $(( $(stat -c %s "$trial/trial.log") / 1048576 )) MiB)"
python3 - "$trial/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = r.get("exception_info") or {}
print("outcome:", (r.get("verifier_result") or {}).get("rewards"), e.get("exception_type"))
for t in r.get("truncated_outputs", []):
    print(f"cut at the cap: {t['path']} ({t['cap_bytes'] >> 20} MiB)")
PY
