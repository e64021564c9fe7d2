#!/usr/bin/env bash
# Runs Harbor's own example tasks (`examples/tasks` of a Harbor repository) through runner with
# the oracle agent, one trial each, and prints a line per task: its reward or why it has none.
#
# This machine is offline: every `FROM` of a public base image and every `docker_image` naming
# one is swapped for the offline base image (`runner-base:bookworm-py`, made by
# scripts/base-image.sh) before the run, so tasks that need something only their real base has
# (apk, curl, a CUDA toolkit) or the internet fail for that reason, not runner's; the table in
# the issue note says which.
#
# Many of Harbor's examples reach the internet on purpose (the network-policy matrix probes
# example.com, hello-world's tests fetch uv from astral.sh, some builds pull from ghcr.io). On a
# machine whose traffic must stay on loopback those tasks are skipped, each named with the hosts
# its files contain; HARBOR_EXAMPLES_ONLINE=1 runs them too, where internet access is allowed.
#
# Usage: scripts/harbor-examples.sh HARBOR_REPO [OUT_DIR]
#   HARBOR_REPO  a Harbor checkout, or a bare git directory (its HEAD is read)
#   OUT_DIR      where the tasks and job directories go (default: a new temporary directory)
# Env: RUNNER (default target/release/runner, else target/debug/runner).
set -euo pipefail
cd "$(dirname "$0")/.."

repo=${1:?usage: scripts/harbor-examples.sh HARBOR_REPO [OUT_DIR]}
out=${2:-$(mktemp -d)}
base=runner-base:bookworm-py
runner=${RUNNER:-}
if [ -z "$runner" ]; then
    runner=target/release/runner
    [ -x "$runner" ] || runner=target/debug/runner
fi
[ -x "$runner" ] || { echo "error: no runner binary at $runner; cargo build -p runner" >&2; exit 2; }

mkdir -p "$out/src" "$out/jobs"
if [ -d "$repo/examples/tasks" ]; then
    cp -a "$repo/examples/tasks" "$out/src/"
else
    git --git-dir="$repo" archive HEAD examples/tasks | tar -x -C "$out/src" --strip-components=1
fi

# Public bases named by Harbor's examples; anything else (a private registry, a build stage
# image) is left as it is and fails to pull, which the table shows.
swap='s#^FROM \(ubuntu:24\.04\|python:3\.1[23]-slim\|alpine:3\.22\|nvidia/cuda:[^ ]*\)#FROM '"$base"'#'
find "$out/src" -name 'Dockerfile*' -exec sed -i "$swap" {} +
find "$out/src" -name task.toml -exec sed -i 's#^docker_image = "ubuntu:24.04"#docker_image = "'"$base"'"#' {} +

printf '%-55s %s\n' task outcome
find "$out/src" -name task.toml -printf '%h\n' | sort | while read -r task; do
    rel=${task#"$out/src/tasks/"}
    name=${rel//\//-}
    if [ "${HARBOR_EXAMPLES_ONLINE:-0}" != 1 ]; then
        hosts=$(grep -rhoP 'https?://(?!(localhost|127\.0\.0\.1|0\.0\.0\.0)[:/])[A-Za-z0-9-]+\.[A-Za-z0-9.-]+|^FROM [a-z0-9-]+\.[a-z0-9.-]+(?=[:/])|--from=[a-z0-9-]+\.[a-z0-9.-]+(?=[:/])' \
            "$task" 2>/dev/null | sed 's#^.*[/ =]##' | sort -u | tr '\n' ' ' || true)
        if [ -n "$hosts" ]; then
            printf '%-55s skipped: its files reach %s(HARBOR_EXAMPLES_ONLINE=1 runs it)\n' "$rel" "$hosts"
            continue
        fi
    fi
    if ! "$runner" run --path "$task" --agent oracle --k 1 --jobs-dir "$out/jobs" \
        --job-name "$name" >"$out/jobs/$name.out" 2>&1; then
        :
    fi
    python3 - "$out/jobs/$name" "$out/jobs/$name.out" "$rel" <<'EOF'
import glob, json, os, sys
job, log, rel = sys.argv[1:]
results = sorted(glob.glob(os.path.join(job, "*", "result.json")))
if not results:
    lines = [l.strip() for l in open(log, errors="replace") if l.strip()]
    why = next((l for l in lines if l.startswith("error")), lines[-1] if lines else "no output")
    print(f"{rel:<55} not run: {why[:160]}")
    sys.exit(0)
for path in results:
    r = json.load(open(path))
    exc = r.get("exception_info") or {}
    rewards = ((r.get("verifier_result") or {}).get("rewards")) or {}
    reward = rewards.get("reward", next(iter(rewards.values()), None)) if rewards else None
    tail = f" ({exc.get('exception_type')}: {exc.get('exception_message', '')[:120]})" if exc else ""
    print(f"{rel:<55} reward {reward}{tail}")
EOF
done
echo "jobs in $out/jobs"
