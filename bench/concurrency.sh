#!/usr/bin/env bash
# Throughput and memory of the real engine by concurrency: the nop agent on tasks/examples,
# K trials per task (default 13: 65 trials, so -n 64 runs nearly all at once), at
# -n 1, 2, 4, 8, 16, 32, 64. Prints trials/min from the job's wall time and the runner
# process's peak RSS (/usr/bin/time -v, "Maximum resident set size").
#
#   bench/concurrency.sh [K] [LEVELS...]      e.g. bench/concurrency.sh 13 1 8 64
set -euo pipefail
cd "$(dirname "$0")/.."
k="${1:-13}"; shift || true
levels=("$@"); [ ${#levels[@]} -eq 0 ] && levels=(1 2 4 8 16 32 64)
bash scripts/base-image.sh >/dev/null
cargo build --release -q -p runner
bin=$PWD/target/release/runner
jobs=$(mktemp -d)
trap 'rm -rf "$jobs"' EXIT
"$bin" run --path tasks/examples --agent nop --k 1 --jobs-dir "$jobs" --job-name warmup >/dev/null 2>&1 || true
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%4s %7s %8s %12s %12s %10s\n" n trials wall_s trials_per_min peak_rss_mb overhead_s
for n in "${levels[@]}"; do
    start=$(date +%s.%N)
    /usr/bin/time -v -o "$jobs/time-$n" "$bin" run --path tasks/examples --agent nop --k "$k" \
        --n-concurrent "$n" --max-retries 0 --jobs-dir "$jobs" --job-name "n$n" >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    trials=$(ls "$jobs/n$n"/*/result.json 2>/dev/null | wc -l)
    rss=$(awk -F: '/Maximum resident set size/ {printf "%.1f", $2/1024}' "$jobs/time-$n")
    over=$(grep -ah "overhead:" "$jobs/n$n"/*/trial.log | sed -E 's/.*runner ([0-9.]+)s/\1/' | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}')
    awk -v n="$n" -v t="$trials" -v s="$start" -v e="$end" -v r="$rss" -v o="$over" \
        'BEGIN { w = e - s; printf "%4d %7d %8.1f %12.1f %12s %10s\n", n, t, w, t / w * 60, r, o }'
    rm -rf "$jobs/n$n"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
