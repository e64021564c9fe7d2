#!/usr/bin/env bash
# What a trial that does nothing costs, against the engine's own floor, in one run.
#
#   bench/nop-trial.sh [N]      default 10 trials (and 10 floor samples)
#
# - The floor: Docker CLI `create --init IMAGE sleep infinity` + `start` + `exec … true` +
#   `rm -f` of the trial's own image, timed as one, N times (half before the trials, half after).
# - The trials: one job of N `nop` trials of bench/floor-task, one at a time, on its warm image
#   (a warm-up job builds it first). A trial's figure is its trial.log `overhead: wall` (the
#   image wait excluded); its runner overhead is the same line's `runner` (wall minus the time
#   inside the agent's and verifier's commands), which is what the job summary's
#   `runner overhead` line gives per trial.
# - The ratio: median trial wall over median floor.
# - The breakdown: a second job of 3 trials through bench/engine-trace.py (a proxy on the
#   engine socket that times every API call), and bench/trace-report.py of its last trial:
#   its phases with every engine call and exec made in them and how long each took.
#
# RUNNER_BIN picks the binary (default: the release build, built first).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10}"
bash scripts/base-image.sh >/dev/null
if [ -z "${RUNNER_BIN:-}" ]; then
    cargo build --release -q -p runner
fi
bin="${RUNNER_BIN:-$PWD/target/release/runner}"
work=$(mktemp -d /tmp/nop-trial.XXXXXX)
proxy=""
cleanup() {
    [ -n "$proxy" ] && kill "$proxy" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
task=bench/floor-task

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -n | awk '{ v[NR] = $1 } END { printf "%.3f–%.3f", v[1], v[NR] }'; }

# Warm-up: the image is built (or found) here, not in the timed job.
"$bin" run --path "$task" --agent nop --k 1 --jobs-dir "$work/jobs" --job-name warm >"$work/warm.out" 2>&1 || {
    cat "$work/warm.out"
    exit 1
}
image=$(sed -n 's/.* from \(.*\) (sha256:[0-9a-f]*)$/\1/p' "$work"/jobs/warm/*/trial.log | head -1)
[ -n "$image" ] || { echo "no image in the warm-up trial's trial.log" >&2; exit 1; }

floor_samples() { # count
    local i start end id
    for i in $(seq "$1"); do
        start=$(date +%s.%N)
        id=$(docker create --init --label runner.bench=nop-trial "$image" sleep infinity)
        docker start "$id" >/dev/null
        docker exec "$id" true
        docker rm -f "$id" >/dev/null
        end=$(date +%s.%N)
        awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }' >>"$work/floor"
    done
}

floor_samples $((n / 2))
"$bin" run --path "$task" --agent nop --k "$n" --n-concurrent 1 \
    --jobs-dir "$work/jobs" --job-name nop >"$work/nop.out" 2>&1 || true
floor_samples $((n - n / 2))

grep -h 'overhead: wall' "$work"/jobs/nop/*/trial.log |
    sed -E 's/.*wall ([0-9.]+)s, in-container ([0-9.]+)s, runner ([0-9.]+)s/\1 \2 \3/' >"$work/trials"
[ "$(wc -l <"$work/trials")" -eq "$n" ] || { echo "expected $n trials:" >&2; cat "$work/nop.out" >&2; exit 1; }
floor=$(median <"$work/floor")
wall=$(cut -d' ' -f1 "$work/trials" | median)
runner=$(cut -d' ' -f3 "$work/trials" | median)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $n nop trials one at a time, image $image"
echo "runner: $bin (checkout $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- runner || echo ', modified'))"
echo "floor (CLI create + start + exec true + rm): median ${floor}s ($(spread <"$work/floor"))"
echo "nop trial wall:                              median ${wall}s ($(cut -d' ' -f1 "$work/trials" | spread))"
echo "runner overhead (wall minus in-container):   median ${runner}s ($(cut -d' ' -f3 "$work/trials" | spread))"
echo "job summary: $(grep -h 'runner overhead' "$work/nop.out" || echo none)"
echo "ratio (trial wall / floor): $(awk -v w="$wall" -v f="$floor" 'BEGIN { printf "%.2f", w / f }')×"

# The breakdown, through the tracing proxy (it adds well under a millisecond per call).
sock="$work/engine.sock"
engine_sock="${DOCKER_HOST:-unix:///var/run/docker.sock}"
python3 bench/engine-trace.py "$sock" "${engine_sock#unix://}" "$work/trace" &
proxy=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
DOCKER_HOST="unix://$sock" "$bin" run --path "$task" --agent nop --k 3 --n-concurrent 1 \
    --jobs-dir "$work/jobs" --job-name traced >"$work/traced.out" 2>&1 || true
sleep 1 # the last removal, which the job does not wait for before its end's sweep
last=$(ls -d "$work"/jobs/traced/*/ | while read -r d; do echo "$(stat -c %Y "$d/trial.log") $d"; done | sort -n | tail -1 | cut -d' ' -f2)
echo
python3 bench/trace-report.py "$last" "$work/trace"
