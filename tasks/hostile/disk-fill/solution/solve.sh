#!/bin/bash
dd if=/dev/zero of=/app/fill.bin bs=1M count=400 status=none
# Stay around so the runner sees it during the agent phase.
sleep 20
