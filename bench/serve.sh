#!/usr/bin/env bash
# runner serve under load: N OpenEnv sessions at once (default 32) on tasks/examples/hello-file
# through the published openenv-core client (tests/e2e/serve/driver.py bench), each 10 `exec`
# round trips then the oracle and `evaluate` (all must score 1); then one session alone; then,
# in the same run, raw `docker exec` round trips on containers of the same image, one alone
# and N at once. Prints p50/p95 of each.
#
#   bench/serve.sh [N]        RUNNER_BIN=path overrides the binary (default: a debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-32}"
bash scripts/base-image.sh >/dev/null
python=$(bash scripts/openenv-venv.sh)
if [[ -z "${RUNNER_BIN:-}" ]]; then
    cargo build -q -p runner
    RUNNER_BIN=${CARGO_TARGET_DIR:-target}/debug/runner
fi
jobs=$(mktemp -d)
log="$jobs/serve.log"
"$RUNNER_BIN" serve --path tasks/examples --port 0 --max-sessions "$n" --jobs-dir "$jobs" \
    --job-name bench 2>"$log" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$jobs"' EXIT
for _ in $(seq 1 120); do grep -q ' on http://' "$log" && break; sleep 0.5; done
url=$(grep -o 'on http://[0-9.:]*' "$log" | head -1 | cut -c4-)
[[ -n "$url" ]] || { cat "$log" >&2; exit 1; }
image=$(bash scripts/base-image.sh --print-tag)
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg); server $url"
"$python" tests/e2e/serve/driver.py bench "$url" tasks/examples examples/hello-file "$n" "$image"
echo "episodes recorded: $(ls "$jobs"/bench/*/result.json | wc -l); load after: $(cut -d' ' -f1-3 /proc/loadavg)"
