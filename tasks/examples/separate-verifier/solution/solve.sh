#!/bin/bash
set -euo pipefail
mkdir -p /logs/artifacts
python3 -c 'print(sum(int(l) for l in open("/app/numbers.txt") if l.strip()))' > /logs/artifacts/sum.txt
echo "summed /app/numbers.txt with python3" > /app/report.txt
# A decoy: in a shared verifier this would be visible (and a planted reward would count).
echo "if you can read this, the agent's container reached the verifier" > /app/decoy.txt
mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt
