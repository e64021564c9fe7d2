#!/bin/bash
# Runs in the working directory (/app) before the agent's second run.
set -euo pipefail
test -f version.txt
echo prepared > /app/.finalize-setup
