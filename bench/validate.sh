#!/usr/bin/env bash
# Benchmark: `runner validate-submission` on a synthetic submission of 10,000 trials
# (2,000 tasks × k=5 in two job dirs, Harbor [H13] shapes, every rewarded trial with an ATIF
# trajectory, a few log files per trial). Target: under 2 s in release mode.
#
# Usage: bench/validate.sh [N_TRIALS] [RUNS]   (defaults 10000 and 3)
# Needs python3 to generate the fixture. Uses $CARGO_TARGET_DIR if set.
set -euo pipefail

n_trials="${1:-10000}"
runs="${2:-3}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "building runner (release)…" >&2
(cd "$repo" && cargo build --release --quiet --bin runner)
runner="$target/release/runner"

echo "generating $n_trials trials in $work…" >&2
python3 - "$work" "$n_trials" "$repo/leaderboard/tests/fixtures" <<'PY'
import json, os, sys
work, n, fixtures = sys.argv[1], int(sys.argv[2]), sys.argv[3]
job_src = os.path.join(fixtures, "harbor-h13/2026-06-10__12-00-00")
config = json.load(open(os.path.join(job_src, "config.json")))
trial_result = json.load(open(os.path.join(job_src, "regex-log__aB3dE9x/result.json")))
trajectory = open(os.path.join(fixtures, "atif/valid/v1.7.json")).read()
k = 5
n_tasks = n // k
jobs = [os.path.join(work, f"job-{j}") for j in range(2)]
for job in jobs:
    os.makedirs(job)
    json.dump(config, open(os.path.join(job, "config.json"), "w"), indent=4)
    open(os.path.join(job, "job.log"), "w").write("INFO started\n" * 200)
log = "".join(f"[{i:05d}] agent output line with some text, no secrets here\n" for i in range(100))
for t in range(n):
    task, attempt = divmod(t, k)
    job = jobs[t % 2]
    name = f"task-{task:05d}__{attempt}abcdef"
    d = os.path.join(job, name)
    os.makedirs(os.path.join(d, "agent"))
    os.makedirs(os.path.join(d, "verifier"))
    result = dict(trial_result)
    result["task_name"] = f"bench/task-{task:05d}"
    result["trial_name"] = name
    cfg = json.loads(json.dumps(result["config"]))
    cfg["task"]["name"] = result["task_name"]
    cfg["trial_name"] = name
    result["config"] = cfg
    reward = 1.0 if (task + attempt) % 2 == 0 else 0.0
    result["verifier_result"] = {"rewards": {"reward": reward}}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=4)
    json.dump(result, open(os.path.join(d, "result.json"), "w"), indent=4)
    open(os.path.join(d, "trial.log"), "w").write(log)
    open(os.path.join(d, "verifier", "test-stdout.txt"), "w").write(log)
    open(os.path.join(d, "verifier", "reward.txt"), "w").write(f"{reward}\n")
    if reward > 0:
        open(os.path.join(d, "agent", "trajectory.json"), "w").write(trajectory)
PY
du -sh "$work" >&2
find "$work" -type f | wc -l | xargs echo "files:" >&2

best=""
for run in $(seq "$runs"); do
    sync
    start=$(date +%s.%N)
    rc=0
    # CPU time too: on a shared, loaded machine wall time overstates the uncontended figure.
    TIMEFORMAT='  cpu: user %U s, sys %S s'
    time { "$runner" validate-submission "$work"/job-0 "$work"/job-1 --format json > "$work/report.json" || rc=$?; }
    end=$(date +%s.%N)
    secs=$(echo "$end - $start" | bc -l)
    valid=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["valid"], r["figures"]["n_trials"])' "$work/report.json")
    printf 'run %d: %.3f s (exit %d; valid, trials: %s)\n' "$run" "$secs" "$rc" "$valid"
    if [[ -z "$best" ]] || (( $(echo "$secs < $best" | bc -l) )); then best=$secs; fi
done
printf 'best of %d: %.3f s for %d trials on %d cores (target < 2 s)\n' "$runs" "$best" "$n_trials" "$(nproc)"
