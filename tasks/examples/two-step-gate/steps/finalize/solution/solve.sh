#!/bin/bash
set -euo pipefail
printf '%s %s\n' "$(tr a-z A-Z < /app/draft.txt)" "$(cat /app/version.txt)" > /app/final.txt
