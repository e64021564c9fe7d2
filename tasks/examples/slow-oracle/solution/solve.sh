#!/bin/bash
# Deliberately slower than [agent].timeout_sec: the runner must kill this inside
# the container, so the answer below is never written and the reward is 0.
set -euo pipefail
sleep 60
echo done > /app/answer.txt
