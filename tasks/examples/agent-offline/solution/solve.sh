#!/bin/bash
set -euo pipefail
ls /sys/class/net | sort > /app/interfaces.txt
cat /proc/net/route > /app/routes.txt
