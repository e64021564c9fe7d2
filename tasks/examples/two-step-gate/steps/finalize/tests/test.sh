#!/bin/bash
source /tests/lib.sh
reward_if test -f /app/.finalize-setup -a "$(cat /app/final.txt 2>/dev/null)" = "$EXPECTED_FINAL"
