#!/usr/bin/env bash
# The LLM bridge's added latency per call and its throughput with 32 concurrent streaming
# calls, against the scripted upstream on 127.0.0.1 (direct vs bridge socket vs relay + bridge).
#
#   bench/llm-bridge.sh
#
# Builds the bridge in the bench (release) profile; everything runs on this machine and stops
# by itself after a bounded number of calls.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -q -p llm-bridge --bench bridge_latency
