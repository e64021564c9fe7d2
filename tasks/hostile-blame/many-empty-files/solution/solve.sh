#!/bin/bash
# Empty files cost no download budget in bytes; the entry cap bounds them (the e2e test runs
# with --max-download-files 1000, so 20,000 stand in for millions).
mkdir -p /logs/agent/empty /logs/artifacts/empty
cd /logs/agent/empty && seq 1 10000 | xargs touch
cd /logs/artifacts/empty && seq 1 10000 | xargs touch
