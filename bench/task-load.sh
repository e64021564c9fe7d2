#!/usr/bin/env bash
# Benchmark: loading a task with a large data file (`runner tasks digest`, which loads the task:
# its package digest and Harbor 0.26's task_checksum), against the floor of reading and hashing
# that file once (`openssl dgst -sha256`, which uses the CPU's SHA instructions as runner's sha2
# does; coreutils' `sha256sum` for reference). All run with the file in the page cache (one
# warm-up each).
#
# Usage: bench/task-load.sh [MB] [RUNS]   (defaults 400 and 3)
# Uses $RUNNER_BIN if set (e.g. target/debug/runner), else builds the release binary.
set -euo pipefail

mb="${1:-400}"
runs="${2:-3}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

runner="${RUNNER_BIN:-}"
if [ -z "$runner" ]; then
    echo "building runner (release)…" >&2
    (cd "$repo" && cargo build --release --quiet --bin runner)
    runner="${CARGO_TARGET_DIR:-$repo/target}/release/runner"
fi

cp -r "$repo/tasks/examples/hello-file" "$work/task"
head -c "${mb}M" /dev/urandom > "$work/task/environment/data.bin"

measure() { # label, command...
    local label="$1"; shift
    "$@" >/dev/null 2>&1
    for _ in $(seq 1 "$runs"); do
        /usr/bin/time -f "$label: %e s, max RSS %M KB" "$@" 2>&1 >/dev/null | tail -n 1
    done
}

echo "task with a ${mb} MB data file; load average $(cut -d' ' -f1-3 /proc/loadavg)"
measure "floor (openssl dgst -sha256 of the file once)" openssl dgst -sha256 "$work/task/environment/data.bin"
measure "reference (sha256sum of the file once)" sha256sum "$work/task/environment/data.bin"
measure "runner tasks digest" "$runner" tasks digest "$work/task"
