#!/bin/bash
set -euo pipefail
echo draft > /app/draft.txt
