#!/usr/bin/env bash
# Agent setup per trial: Claude Code prepared once and mounted (`-a claude-code`) against the
# same binary pip-installed into every container (the 187 MB claude-agent-sdk wheel, as a
# hand-written config had to before the catalogue), on tasks/examples/hello-file, k trials one
# at a time, through the LLM bridge against the scripted upstream. Prints each trial's
# agent_setup duration (result.json) and the medians.
#
#   bench/agent-setup.sh [K]        (default 3; RUNNER_BIN=target/debug/runner skips the
#                                    release build, UPSTREAM_BIN likewise)
#
# Needs: the offline base image (scripts/base-image.sh), python3 with pip on the host, and the
# package index (the first prepared run fetches the wheel into ~/.cache/runner/agents once).
set -euo pipefail
cd "$(dirname "$0")/.."
k="${1:-3}"
runner="${RUNNER_BIN:-target/release/runner}"
upstream_bin="${UPSTREAM_BIN:-target/release/examples/scripted-upstream}"
if [ -z "${RUNNER_BIN:-}" ]; then
    cargo build -q --release -p runner
    cargo build -q --release -p testkit --example scripted-upstream
fi
work=$(mktemp -d)
trap 'kill "$upstream_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$((20000 + RANDOM % 20000))
"$upstream_bin" --port "$port" --dialect claude-code --key bench-key \
    >"$work/upstream.env" 2>/dev/null &
upstream_pid=$!
sleep 1
cat >"$work/llm.toml" <<EOF
[[providers]]
name = "anthropic"
api = "anthropic"
base_url = "http://127.0.0.1:$port"
key_env = "ANTHROPIC_API_KEY"
EOF
# The "before" config: the same run command, the wheel installed in each container.
sed -e 's/^install = "prepared"/install = "pip-per-trial"/' \
    -e '/^\[prepare\]/,/^bin = /d' \
    adapter/agents/claude-code/agent.toml >"$work/per-trial.toml"
python3 - "$work/per-trial.toml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('[install]\ncommands = [', '''[install]
host_package_index = true
commands = [
    """
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
    pip3 install -q --break-system-packages --target /opt/claude-sdk claude-agent-sdk=={kwargs.sdk_version}
    mkdir -p /opt/runner-agent/bin && ln -sf /opt/claude-sdk/claude_agent_sdk/_bundled/claude /opt/runner-agent/bin/claude
    chmod +x /opt/claude-sdk/claude_agent_sdk/_bundled/claude
    """,''', 1)
open(p, "w").write(s)
PY
setup_seconds() {
    python3 - "$1" <<'PY'
import json, sys, glob, datetime
def t(s): return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
rows = []
for path in sorted(glob.glob(sys.argv[1] + "/*/*/result.json")):
    r = json.load(open(path))
    s = r.get("agent_setup") or {}
    if s.get("started_at") and s.get("finished_at"):
        rows.append((t(s["finished_at"]) - t(s["started_at"])).total_seconds())
rows.sort()
print(" ".join(f"{x:.2f}" for x in rows), "| median", f"{rows[len(rows)//2]:.2f}" if rows else "-")
PY
}
for variant in prepared per-trial; do
    agent=claude-code
    [ "$variant" = per-trial ] && agent="$work/per-trial.toml"
    ANTHROPIC_API_KEY=bench-key "$runner" run --path tasks/examples -i hello-file -k "$k" -n 1 \
        -a "$agent" -m anthropic/claude-scripted --llm-config "$work/llm.toml" \
        --agent-setup-timeout-multiplier 4 --jobs-dir "$work/$variant" --job-name bench -q \
        >/dev/null 2>"$work/$variant.log" || { echo "$variant run failed:"; tail -20 "$work/$variant.log"; }
    printf '%-10s agent setup per trial (s): %s\n' "$variant" "$(setup_seconds "$work/$variant")"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
