#!/usr/bin/env bash
# The floor benchmark: per-trial overhead of runner against raw bollard, in one interleaved run.
#
#   bench/floor.sh [ROUNDS]      default 5 rounds (about a minute and a half on 2 cores)
#
# Each round takes two samples of (a) bollard create + start + exec + remove of the examples'
# image and (b) a runner trial of bench/floor-task (nop agent, trivial verifier), and one job of
# (c) the oracle on tasks/examples. Prints medians and spreads, and (b), (c) over (a).
# FLOOR_SKIP_EXAMPLES=1 leaves (c) out (about 20 s then). Run it before any trial-path change.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/base-image.sh >/dev/null
cargo build --release -q -p runner
FLOOR_ROUNDS="${1:-5}" RUNNER_BIN="$PWD/target/release/runner" \
    cargo bench -q -p docker-backend --bench floor
