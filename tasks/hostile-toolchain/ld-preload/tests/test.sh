#!/bin/bash
# The tests see the preload file only if the agent's hook would run.
if [ -s /etc/ld.so.preload ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
