#!/bin/bash
set -e
test -f /opt/seed/value
