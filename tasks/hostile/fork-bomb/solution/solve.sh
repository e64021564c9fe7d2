#!/bin/bash
# The limit the runner set, for the end-to-end test to check.
{ cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; } > /logs/agent/pids-max.txt
# Exponential, bounded in depth (2^15 processes) so even a missing limit cannot take the host down for long.
bomb() { if [ "$1" -gt 0 ]; then bomb $(($1 - 1)) & bomb $(($1 - 1)) & wait; else sleep 20; fi; }
bomb 14 2>/dev/null
