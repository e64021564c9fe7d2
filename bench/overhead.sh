#!/usr/bin/env bash
# Runner overhead per trial: trial wall time minus time spent inside the container's commands
# (each trial.log ends with "overhead: wall Ws, in-container Cs, runner Rs").
#
#   bench/overhead.sh [K] [N_CONCURRENT] [AGENT]     defaults: 3 trials per task, 1 at a time, oracle
#
# Images are built (or reused) before timing starts, so the figures are per-trial costs:
# container create/start, /logs setup, uploads, downloads, records and teardown.
set -euo pipefail
cd "$(dirname "$0")/.."
k="${1:-3}"; n="${2:-1}"; agent="${3:-oracle}"
bash scripts/base-image.sh >/dev/null
cargo build --release -q -p runner
bin=target/release/runner
jobs=$(mktemp -d)
trap 'rm -rf "$jobs"' EXIT
# Warm-up job: builds the task images so the timed job measures trials only.
"$bin" run --path tasks/examples --agent nop --k 1 --jobs-dir "$jobs" --job-name warmup >/dev/null 2>&1 || true
start=$(date +%s.%N)
"$bin" run --path tasks/examples --agent "$agent" --k "$k" --n-concurrent "$n" --jobs-dir "$jobs" --job-name bench >/dev/null 2>&1 || true
end=$(date +%s.%N)
grep -ah "overhead:" "$jobs"/bench/*/trial.log | sed -E 's/.*wall ([0-9.]+)s, in-container ([0-9.]+)s, runner ([0-9.]+)s/\1 \2 \3/' | sort -k3 -n | awk -v total="$(echo "$end - $start" | bc)" -v k="$k" -v n="$n" '
    { wall += $1; inside += $2; over[NR] = $3; sum += $3 }
    END {
        if (NR == 0) { print "no trials measured"; exit 1 }
        printf "trials: %d (k=%d, %d at once)  job wall: %.1fs\n", NR, k, n, total
        printf "per trial: wall %.3fs, in-container %.3fs\n", wall / NR, inside / NR
        printf "runner overhead per trial: mean %.3fs  median %.3fs  min %.3fs  max %.3fs\n", sum / NR, over[int((NR + 1) / 2)], over[1], over[NR]
    }'
