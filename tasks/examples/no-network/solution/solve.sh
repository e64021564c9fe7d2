#!/bin/bash
set -euo pipefail
python3 -c 'import sys; print(sum(int(l) for l in open("/app/numbers.txt") if l.strip()))' > /app/sum.txt
