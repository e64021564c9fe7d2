#!/bin/bash
# Fails on purpose: the step cannot be set up.
echo "no config for the second step" >&2
exit 3
