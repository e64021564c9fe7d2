#!/bin/bash
# The reward needs the report; the log is only collected (it is an artifact, not a check).
mkdir -p /logs/verifier
if [ "$(cat /app/report.txt 2>/dev/null)" = "$(wc -l < /app/data.txt)" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
    exit 1
fi
