#!/usr/bin/env bash
# Cold image builds of the example tasks: runner (BuildKit through the engine API, via
# `runner images pull --force-build`) against `docker build` with BuildKit, on the same
# Dockerfiles, in one run. Every timed build is of a fresh copy of the examples whose
# Dockerfiles declare `ARG RUNNER_BENCH_NONCE=<new value>` after FROM: BuildKit puts declared
# args into the cache key of every RUN step, so no RUN is served from cache, without pruning
# the engine's build cache (other users of the engine keep theirs), and the content-addressed
# tags are new, so no image in use elsewhere is touched. The base image (scripts/base-image.sh)
# stays, as it would on any machine that has the FROM image.
#
#   bench/images.sh [ROUNDS]      default 3; the two tools alternate which goes first
#
# Environment: RUNNER_BIN (default: a release build), DOCKER (a docker CLI that can build with
# BuildKit; default: the first on PATH for which `DOCKER_BUILDKIT=1 docker build` works).
# Prints per round the wall time of each tool for all images, then the medians. The legacy
# builder (`DOCKER_BUILDKIT=0`, what runner used before) is timed after each round for scale.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
bash scripts/base-image.sh >/dev/null 2>&1
if [ -z "${RUNNER_BIN:-}" ]; then
    cargo build --release -q -p runner
    RUNNER_BIN=target/release/runner
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A ledger of this run only, so the final prune removes this run's runner images alone.
export RUNNER_STATE_DIR="$work/state"

# A docker CLI whose BuildKit builds work here (the one on PATH may lack the buildx plugin).
probe="$work/probe"
mkdir -p "$probe"
printf 'FROM runner-base:bookworm-py\n' >"$probe/Dockerfile"
cli="${DOCKER:-}"
if [ -z "$cli" ]; then
    for candidate in $(type -ap docker); do
        if DOCKER_BUILDKIT=1 "$candidate" build -q -t runner-bench-probe "$probe" >/dev/null 2>&1; then
            cli="$candidate"
            break
        fi
    done
fi
[ -n "$cli" ] || { echo "no docker CLI here builds with BuildKit (install buildx, or set DOCKER)" >&2; exit 1; }
docker rmi runner-bench-probe >/dev/null 2>&1 || true

tasks=()
for dir in tasks/examples/*/; do
    [ -f "$dir/environment/Dockerfile" ] && tasks+=("$(basename "$dir")")
done

now() { date +%s.%N; }
# A fresh copy of the examples with a new nonce; prints its path.
fresh() {
    local copy="$work/examples-$1"
    cp -r tasks/examples "$copy"
    for t in "${tasks[@]}"; do
        sed -i "/^FROM /a ARG RUNNER_BENCH_NONCE=$1" "$copy/$t/environment/Dockerfile"
    done
    echo "$copy"
}
time_runner() {
    local copy start end
    copy=$(fresh "r$1-$$")
    start=$(now)
    "$RUNNER_BIN" images pull --path "$copy" --force-build -n 1 >"$work/runner.out" 2>"$work/runner.err" ||
        { cat "$work/runner.err" >&2; exit 1; }
    end=$(now)
    echo "$end - $start" | bc
}
# `docker build` of each task: $1 the round, $2 the copy's prefix, $3 DOCKER_BUILDKIT (1 BuildKit;
# 0 the legacy builder, whose chatter on stderr is dropped).
time_docker_build() {
    local copy start end err=/dev/stderr
    [ "$3" = 0 ] && err=/dev/null
    copy=$(fresh "$2$1-$$")
    start=$(now)
    for t in "${tasks[@]}"; do
        DOCKER_BUILDKIT=$3 "$cli" build -q -t "runner-bench-docker-$t:$1-$$" "$copy/$t/environment" >/dev/null 2>>"$err"
    done
    end=$(now)
    echo "$end - $start" | bc
}
time_docker() { time_docker_build "$1" d 1; }
time_legacy() { time_docker_build "$1" l 0; }
cleanup() {
    # Only this run's images: the docker builds' tags and the runner builds in its ledger.
    docker images --format '{{.Repository}}:{{.Tag}}' | grep -E "^runner-bench-docker-.*:[0-9]+-$$\$" |
        xargs -r docker rmi >/dev/null 2>&1 || true
    "$RUNNER_BIN" images prune --older-than 0 >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "cold builds (every RUN step runs) of ${#tasks[@]} example images, one at a time; docker CLI: $cli ($("$cli" version --format '{{.Client.Version}}' 2>/dev/null)), engine $(docker version --format '{{.Server.Version}}')"
runner_times=()
docker_times=()
legacy_times=()
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then
        r=$(time_runner "$round"); d=$(time_docker "$round")
    else
        d=$(time_docker "$round"); r=$(time_runner "$round")
    fi
    l=$(time_legacy "$round")
    runner_times+=("$r"); docker_times+=("$d"); legacy_times+=("$l")
    printf 'round %d: runner %.2fs  docker build (BuildKit) %.2fs  legacy builder %.2fs\n' "$round" "$r" "$d" "$l"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
per() { echo "$1 / ${#tasks[@]}" | bc -l; }
mr=$(median "${runner_times[@]}"); md=$(median "${docker_times[@]}"); ml=$(median "${legacy_times[@]}")
printf 'median: runner %.2fs (%.2fs per image)  docker build (BuildKit) %.2fs (%.2fs per image)  legacy builder (runner before) %.2fs (%.2fs per image)\n' \
    "$mr" "$(per "$mr")" "$md" "$(per "$md")" "$ml" "$(per "$ml")"
echo "runner's last summary:"
cat "$work/runner.out"
