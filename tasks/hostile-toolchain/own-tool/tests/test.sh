#!/bin/bash
if [ "$(agent-tool)" = built-by-the-agent ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
