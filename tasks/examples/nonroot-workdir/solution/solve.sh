#!/bin/bash
# Relative path on purpose: this only lands in /srv/work if the runner honours [environment].workdir.
set -euo pipefail
id -un > result.txt
