#!/bin/bash
# Runs the checks; the reward is 1 only when every check passed.
# The exit code is informational: the runner scores from reward.txt alone.
# Keep /tests clean: the harness import would otherwise write __pycache__ there.
export PYTHONDONTWRITEBYTECODE=1
mkdir -p /logs/verifier
if python3 /tests/test_outputs.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
    exit 1
fi
