#!/bin/bash
# The reference solution: the oracle agent runs it as the agent would.
set -euo pipefail
sum=0
while read -r n; do sum=$((sum + n)); done < /app/numbers.txt
echo "$sum" > /app/answer.txt
