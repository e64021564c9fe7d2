#!/bin/bash
# Honest: python3 must report the failure it is asked for.
if python3 -c "import sys; sys.exit(1)"; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
