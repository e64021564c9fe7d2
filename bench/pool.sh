#!/usr/bin/env bash
# The examples at k=5 (the oracle) on one engine and on a pool of three engines of this
# machine (the machine's own and two from scripts/docker-engines.sh), at the same 4 trials at
# once (the pool's own cost) and at 4 per engine (what three engines' worth of slots give on
# this machine's cores), and the raw floor in the same run: `docker run --rm` of the base image through the
# Docker CLI on one engine. Prints each job's wall time, trials per minute overall and per
# engine (from each result.json's `engine`). All engines share this machine's cores, so the
# pool cannot beat one engine by more than the cores allow: what it shows is that the pool
# adds no cost of its own (the pool's own cost per placement is `cargo bench -p engine
# --bench pool`).
#
#   bench/pool.sh [K]      default 5
set -euo pipefail
cd "$(dirname "$0")/.."
k="${1:-5}"
bash scripts/base-image.sh >/dev/null
bash scripts/docker-engines.sh start 2 >/dev/null
cargo build -q -p runner
bin=$PWD/target/debug/runner
jobs=$(mktemp -d)
trap 'rm -rf "$jobs"' EXIT
pool=(--docker-host unix:///var/run/docker.sock)
IFS=, read -r -a extra <<<"$(bash scripts/docker-engines.sh hosts 2)"
for url in "${extra[@]}"; do pool+=(--docker-host "$url"); done
# Warm each engine's image cache, so both jobs start from built images.
"$bin" run --path tasks/examples --agent oracle --k 1 -n 6 "${pool[@]}" --jobs-dir "$jobs" --job-name warm >/dev/null 2>&1 || true
echo "machine: $(nproc) cores; $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg); k=$k"
run() { # name, n, engine flags...
    local name=$1 n=$2; shift 2
    local start end
    start=$(date +%s.%N)
    "$bin" run --path tasks/examples --agent oracle --k "$k" -n "$n" --max-retries 0 "$@" \
        --jobs-dir "$jobs" --job-name "$name" >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    python3 - "$jobs/$name" "$start" "$end" "$name" <<'PY'
import collections, glob, json, sys
job, start, end, name = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
wall = end - start
per = collections.Counter()
rewards = []
errors = collections.Counter()
for path in glob.glob(f"{job}/*/result.json"):
    r = json.load(open(path))
    per[r.get("engine") or "the default engine"] += 1
    errors[(r.get("exception_info") or {}).get("exception_type")] += 1
    rewards.append(((r.get("verifier_result") or {}).get("rewards") or {}).get("reward"))
n = len(rewards)
print(f"{name}: {n} trials in {wall:.1f} s, {n / wall * 60:.1f} trials/min, mean reward {sum(x or 0 for x in rewards) / max(n, 1):.3f}")
del errors[None]
print(f"  exceptions: {dict(errors) or 'none'}")
for engine, count in sorted(per.items()):
    print(f"  {engine}: {count} trials, {count / wall * 60:.1f} trials/min")
PY
}
run one-engine 4
run three-engines-n4 4 "${pool[@]}"
run three-engines-n12 12 "${pool[@]}"
for _ in 1 2 3 4 5; do
    s=$(date +%s.%N); docker run --rm runner-base:bookworm-py true; e=$(date +%s.%N)
    awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f\n", b - a }'
done | sort -n | awk '{ v[NR] = $1 } END { print "floor (docker run --rm … true, one engine): median " v[3] " s" }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
