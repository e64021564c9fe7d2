#!/usr/bin/env bash
# The added cost per trial of an allowlist phase (the egress proxy, its mount and a relay per
# phase) against the same trial with a no-network phase, and the raw floor in the same run:
# `docker run --rm --network none` of the same image, through the Docker CLI.
#
#   bench/egress.sh [TRIALS]     default 8 trials of each, one at a time
#
# The tasks' oracle does nothing over the network (no traffic leaves the machine): what is
# measured is the plumbing. Figures: the median trial wall time of each job (from each trial's
# `overhead: wall` line) and the floor's median.
set -euo pipefail
cd "$(dirname "$0")/.."
trials="${1:-8}"
bash scripts/base-image.sh >/dev/null
cargo build -q -p runner
bin=target/debug/runner
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

task() { # name, [agent] section
    local dir="$work/tasks-$1/$1"
    mkdir -p "$dir/environment" "$dir/solution" "$dir/tests"
    printf 'schema_version = "1.3"\n[task]\nname = "bench/%s"\n%s\n[verifier]\ntimeout_sec = 60.0\n[environment]\nbuild_timeout_sec = 300.0\n' \
        "$1" "$2" >"$dir/task.toml"
    echo "Do nothing." >"$dir/instruction.md"
    printf 'FROM runner-base:bookworm-py\nWORKDIR /app\n' >"$dir/environment/Dockerfile"
    printf '#!/bin/bash\ntrue\n' >"$dir/solution/solve.sh"
    printf '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n' >"$dir/tests/test.sh"
}
task no-network $'[agent]\ntimeout_sec = 60.0\nnetwork_mode = "no-network"'
task allowlist $'[agent]\ntimeout_sec = 60.0\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]'

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for kind in no-network allowlist; do
    "$bin" run --path "$work/tasks-$kind" --agent oracle --k "$trials" --n-concurrent 1 \
        --jobs-dir "$work/jobs" --job-name "$kind" >"$work/$kind.out" 2>&1
    grep -h 'overhead: wall' "$work/jobs/$kind"/*/trial.log | sed 's/.*wall \([0-9.]*\)s.*/\1/' | median >"$work/$kind.median"
done
for _ in $(seq "$trials"); do
    start=$(date +%s.%N)
    docker run --rm --network none runner-base:bookworm-py true
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'
done | median >"$work/floor.median"

floor=$(cat "$work/floor.median")
plain=$(cat "$work/no-network.median")
allow=$(cat "$work/allowlist.median")
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $trials trials of each, one at a time"
echo "floor (docker run --rm --network none ... true): ${floor}s"
echo "no-network agent phase, trial wall median: ${plain}s"
echo "allowlist agent phase, trial wall median:  ${allow}s"
echo "added by the allowlist: $(awk -v a="$allow" -v p="$plain" 'BEGIN { printf "%.3f", a - p }')s per trial"
