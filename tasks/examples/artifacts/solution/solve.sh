#!/bin/bash
set -euo pipefail
mkdir -p /app/logs
wc -l < /app/data.txt > /app/report.txt
echo "counted the lines of /app/data.txt into /app/report.txt" > /app/logs/run.log
echo "scratch" > /app/logs/scratch.tmp
